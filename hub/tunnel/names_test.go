package tunnel

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
)

func TestShootOfServerName(t *testing.T) {
	name := ShootServerName("api1", "dev", "tunnel.example.org")
	if name != "api.api1.dev.tunnel.example.org" {
		t.Fatalf("ShootServerName = %q", name)
	}
	for _, in := range []string{name, strings.ToUpper(name), name + "."} {
		project, shoot, err := ShootOfServerName(in, "tunnel.example.org")
		if err != nil || project != "dev" || shoot != "api1" {
			t.Errorf("%s: %q %q %v", in, project, shoot, err)
		}
	}
	for in, want := range map[string]string{
		"api.api1.dev.example.org":                "not in the tunnel domain",
		"api1.dev.tunnel.example.org":             "is not api.<shoot>.<project>",
		"api.x.api1.dev.tunnel.example.org":       "is not api.<shoot>.<project>",
		"web.api1.dev.tunnel.example.org":         "is not api.<shoot>.<project>",
		"api.-bad.dev.tunnel.example.org":         "-bad",
		"api.api1.dev.eviltunnel.example.org":     "not in the tunnel domain",
		"api.api1.dev.tunnel.example.org.evil.io": "not in the tunnel domain",
	} {
		if _, _, err := ShootOfServerName(in, "tunnel.example.org"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", in, err, want)
		}
	}
}

func TestLimits(t *testing.T) {
	l := newLimits(3, 2)
	r1, err := l.acquire("s", "a")
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := l.acquire("s", "a")
	if _, err := l.acquire("s", "a"); err == nil || !strings.Contains(err.Error(), `client "a"`) {
		t.Fatalf("third of client a: %v", err)
	}
	r3, _ := l.acquire("s", "b")
	if _, err := l.acquire("s", "c"); err == nil || !strings.Contains(err.Error(), `seed "s"`) {
		t.Fatalf("fourth of seed s: %v", err)
	}
	if _, err := l.acquire("other", "c"); err != nil {
		t.Fatalf("another seed: %v", err)
	}
	r1()
	r1() // releasing twice releases once
	if _, err := l.acquire("s", "c"); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if _, err := l.acquire("s", "c"); err == nil {
		t.Fatal("a double release made room twice")
	}
	r2()
	r3()
}

// noDialer dials nothing; New only needs one to exist.
type noDialer struct{}

func (noDialer) DialTunnel(context.Context, string, *agentv1.TunnelTarget) (net.Conn, error) {
	return nil, errors.New("no dialer")
}

func TestNewRefusesBadConfig(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "Dialer") {
		t.Fatalf("no dialer: %v", err)
	}
	if _, err := New(Config{Dialer: noDialer{}, Domain: "Bad_Domain"}); err == nil || !strings.Contains(err.Error(), "tunnel-domain") {
		t.Fatalf("bad domain: %v", err)
	}
}
