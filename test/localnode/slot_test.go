package localnode

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

func TestSlotNetworksAreDisjoint(t *testing.T) {
	reserved := netip.MustParsePrefix("10.224.0.0/14")
	var all []netip.Prefix
	for i := range Slots {
		s := newSlot(i)
		for _, p := range []netip.Prefix{s.PodCIDR, s.ServiceCIDR, s.NodeCIDR} {
			if !reserved.Contains(p.Addr()) || p.Bits() < reserved.Bits() {
				t.Fatalf("slot %d: %s is outside %s", i, p, reserved)
			}
			for _, q := range all {
				if p.Overlaps(q) {
					t.Fatalf("slot %d: %s overlaps %s", i, p, q)
				}
			}
			all = append(all, p)
		}
		if !s.PodCIDR.Contains(s.PodCIDR.Addr().Next()) || !s.ServiceCIDR.Contains(s.DNSIP) ||
			!s.ServiceCIDR.Contains(s.APIServiceIP) || !s.NodeCIDR.Contains(s.HostIP) || !s.NodeCIDR.Contains(s.NodeIP) {
			t.Fatalf("slot %d: addresses outside their networks: %+v", i, s)
		}
		if len(s.HostVeth()) > 15 || len(s.Bridge()) > 15 {
			t.Fatalf("slot %d: interface names %q, %q longer than Linux allows", i, s.HostVeth(), s.Bridge())
		}
	}
}

func TestSlotSkipsOverlappingRoutes(t *testing.T) {
	s := newSlot(3)
	if s.overlaps([]route{{dev: "eth0", prefix: netip.MustParsePrefix("192.0.2.0/24")}, {dev: "eth0", prefix: netip.MustParsePrefix("0.0.0.0/0")}}) {
		t.Error("a default route and an unrelated network overlap the slot")
	}
	if !s.overlaps([]route{{dev: "eth1", prefix: netip.MustParsePrefix("10.224.0.0/16")}}) {
		t.Error("a route over the slot's pod network does not overlap it")
	}
	if s.overlaps([]route{{dev: s.HostVeth(), prefix: s.PodCIDR}}) {
		t.Error("the slot's own route overlaps it")
	}
}

// TestReserveCleansAfterKilledRun leaves behind what a node of a killed process leaves: its network namespace and
// veth, a process in the namespace that outlived its parent (as containerd's shims do), a process in the node's
// cgroups, a mount under its state directory, its directories; then drops the slot's lock without cleaning up.
// The next Reserve removes it all.
func TestReserveCleansAfterKilledRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	s, err := Reserve(-1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = s.cleanup()
		s.Release()
	}()
	if err := setupNetwork(s); err != nil {
		t.Fatal(err)
	}
	inNS := exec.Command("nsenter", "--net="+s.NetNSPath(), "--", "sleep", "600")
	inCgroup := exec.Command("sleep", "600")
	for _, c := range []*exec.Cmd{inNS, inCgroup} {
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = c.Wait() }()
	}
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, s.Name(), "kubepods", "pod1")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("cgroup %s: %v", dir, err)
		}
		if filepath.Base(h) == "memory" {
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(inCgroup.Process.Pid)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	volume := filepath.Join(s.StateDir(), "kubelet", "pods", "x", "volumes")
	if err := os.MkdirAll(volume, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", volume, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(s.RunDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	left := s.Leftovers()
	if len(left) < 6 {
		t.Fatalf("the simulated run left only %v", left)
	}
	t.Logf("a killed run left: %v", left)
	index := s.Index
	s.Release() // the process "dies" holding no lock and having cleaned nothing

	again, err := Reserve(index)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if again.Index != index {
		t.Errorf("Reserve(%d) took slot %d, want the free preferred one", index, again.Index)
	}
	if left := newSlot(index).Leftovers(); len(left) > 0 {
		t.Fatalf("after the next Reserve, left: %v", left)
	}
	for _, c := range []*exec.Cmd{inNS, inCgroup} {
		if err := c.Process.Signal(syscall.Signal(0)); err == nil {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(c.Process.Pid) + "/stat"); len(b) > 0 && !containsZombie(string(b)) {
				t.Errorf("process %d of the killed run still runs", c.Process.Pid)
			}
		}
	}
}

func containsZombie(stat string) bool {
	for i := len(stat) - 1; i > 0; i-- {
		if stat[i] == ')' {
			return len(stat) > i+2 && stat[i+2] == 'Z'
		}
	}
	return false
}
