package tunnel_test

import (
	"crypto/tls"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub/tunnel"
	"github.com/trellis-dev/trellis/test/agenttest"
)

// TestSlowTunnelStallsNoOther: a tunnel whose client stops reading while its target keeps sending is held up by its
// own flow control only. Once the bytes in flight have filled its window and buffers, another tunnel of the same
// agent still carries round trips, the agent's session stays up, and the stalled tunnel moves again when its client
// reads.
func TestSlowTunnelStallsNoOther(t *testing.T) {
	e := start(t)
	e.devShoot(t, "flow")

	// The target: after the handshake, a first byte 's' makes it send until the connection closes; any other byte
	// is echoed, and so is every byte after it.
	lis := tlsListener(t)
	var sent atomic.Int64 // bytes the flooding connection wrote
	var wg sync.WaitGroup
	t.Cleanup(func() { lis.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				b := make([]byte, 1)
				if _, err := c.Read(b); err != nil {
					return
				}
				if b[0] == 's' {
					buf := make([]byte, 32<<10)
					for {
						n, err := c.Write(buf)
						sent.Add(int64(n))
						if err != nil {
							return
						}
					}
				}
				for {
					if _, err := c.Write(b); err != nil {
						return
					}
					if _, err := c.Read(b); err != nil {
						return
					}
				}
			})
		}
	})
	e.shootAPIServer(t, "dev", "flow", lis.Addr().String())
	dial := func() *tls.Conn {
		c, err := tls.Dial("tcp", e.hub.TunnelAddr(), &tls.Config{ServerName: tunnel.ShootServerName("flow", "dev", tunnel.DefaultDomain),
			InsecureSkipVerify: true}) //nolint:gosec // the stand-in's certificate is not what this test is about
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	sessions := e.seed.Agent.Agent.Status().Sessions

	// The slow tunnel: asks for the flood, then reads nothing. Wait until the target cannot write any more.
	slow := dial()
	if _, err := slow.Write([]byte{'s'}); err != nil {
		t.Fatal(err)
	}
	var last int64 = -1
	agenttest.Eventually(t, "the slow tunnel's target is blocked by flow control", func() bool {
		now := sent.Load()
		stalled := now == last && now > 0
		last = now
		time.Sleep(200 * time.Millisecond)
		return stalled
	})
	t.Logf("the slow tunnel holds %d bytes in flight", last)

	// Another tunnel of the same agent works meanwhile: round trips, each within a generous deadline.
	other := dial()
	_ = other.SetDeadline(time.Now().Add(30 * time.Second))
	b := []byte{'p'}
	for i := range 100 {
		if _, err := other.Write(b); err != nil {
			t.Fatalf("round trip %d on another tunnel: %v", i, err)
		}
		if _, err := io.ReadFull(other, b); err != nil {
			t.Fatalf("round trip %d on another tunnel while one is stalled: %v", i, err)
		}
	}
	if s := e.seed.Agent.Agent.Status().Sessions; s != sessions {
		t.Errorf("the agent's sessions went from %d to %d while a tunnel was stalled", sessions, s)
	}
	if sent.Load() != last {
		t.Logf("the slow tunnel's target wrote %d more bytes meanwhile", sent.Load()-last)
	}

	// The slow tunnel was only held up: once its client reads, the flood moves again.
	_ = slow.SetReadDeadline(time.Now().Add(30 * time.Second))
	before := sent.Load()
	if _, err := io.CopyN(io.Discard, slow, 4*(before+1)); err != nil {
		t.Fatalf("reading the stalled tunnel: %v", err)
	}
	if sent.Load() <= before {
		t.Errorf("the slow tunnel's target wrote nothing more after its client read %d bytes", 4*(before+1))
	}
}
