package localnode

import (
	"net/netip"
	"strings"
	"testing"
)

const routeTable = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
	"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
	"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n" +
	"trln3\t0000E00A\t0200E20A\t0003\t0\t0\t0\t0000FFFF\t0\t0\t0\n"

func TestParseRoutes(t *testing.T) {
	routes, err := parseRoutes(strings.NewReader(routeTable))
	if err != nil {
		t.Fatal(err)
	}
	want := []route{{"eth0", netip.MustParsePrefix("0.0.0.0/0")}, {"eth0", netip.MustParsePrefix("192.0.2.0/24")},
		{"trln3", netip.MustParsePrefix("10.224.0.0/16")}}
	if len(routes) != len(want) {
		t.Fatalf("routes %v, want %v", routes, want)
	}
	for i := range want {
		if routes[i] != want[i] {
			t.Errorf("route %d: %v, want %v", i, routes[i], want[i])
		}
	}
	if _, err := parseRoutes(strings.NewReader("h\neth0 zz 0 0 0 0 0 00FFFFFF\n")); err == nil {
		t.Error("a bad destination parsed")
	}
}

func TestParseMountinfo(t *testing.T) {
	in := "36 35 98:0 /mnt1 /var/lib/trellis-node1/with\\040space rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n" +
		"garbage\n" +
		"25 1 0:22 / /sys/fs/cgroup/memory rw,nosuid shared:9 - cgroup cgroup rw,memory\n"
	ms := parseMountinfo(strings.NewReader(in))
	if len(ms) != 2 || ms[0].point != "/var/lib/trellis-node1/with space" || ms[0].fstype != "ext3" ||
		ms[1].point != "/sys/fs/cgroup/memory" || ms[1].fstype != "cgroup" {
		t.Fatalf("mounts %+v", ms)
	}
}

// FuzzParseRoutes and FuzzParseMountinfo feed the kernel's formats with anything: no panic, and every route's prefix
// is masked.
func FuzzParseRoutes(f *testing.F) {
	f.Add(routeTable)
	f.Fuzz(func(t *testing.T, in string) {
		routes, err := parseRoutes(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, r := range routes {
			if r.prefix != r.prefix.Masked() {
				t.Fatalf("unmasked prefix %v", r.prefix)
			}
		}
	})
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add("36 35 98:0 /mnt1 /mnt/a\\040b rw master:1 - ext3 /dev/root rw\n")
	f.Fuzz(func(t *testing.T, in string) {
		for _, m := range parseMountinfo(strings.NewReader(in)) {
			if strings.Contains(m.fstype, " ") {
				t.Fatalf("fstype %q has a space", m.fstype)
			}
		}
	})
}
