package tunnel_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	"github.com/trellis-dev/trellis/hub/tunnel"
	"github.com/trellis-dev/trellis/proto/tunnelwire"
	"github.com/trellis-dev/trellis/test/agenttest"
)

// TestShootAPIThroughAnyReplica: two hub replicas share one etcd, and the seed's agent has its session with the
// first. A client of the second replica's SNI listener reaches the shoot's API server all the same: the second
// forwards the connection, TLS untouched, to the first (its address recorded with the replica in etcd), which opens
// the tunnel. The agent's connections go through a proxy that sends its tunnels' data connections to the second
// replica, as a load balancer might: the second sends each on to the replica whose tunnel it is. A forwarded
// connection that reaches a replica without the agent's session is refused there, not forwarded again.
func TestShootAPIThroughAnyReplica(t *testing.T) {
	endpoint := storetest.StartEtcd(t)
	keys := filepath.Join(t.TempDir(), "encryption-keys")
	shared := func(c *hub.Config) { c.EtcdEndpoints, c.EncryptionKeyFile = []string{endpoint}, keys }
	var bAgentPort atomic.Value // replica b's agent port, once it runs
	bAgentPort.Store("")
	e := startWith(t, func(_ *env, c *agent.Config) { // replica a, with the seed's agent
		a := c.Configuration.HubClientConnection.Address
		c.Configuration.HubClientConnection.Address, _ = sortingProxy(t, func(first byte) string {
			if first == 0x16 {
				return a // the session
			}
			return bAgentPort.Load().(string) // data connections
		})
	}, shared)
	// Replica b serves the admin token that replica a stored (only the replica that stores one writes it out).
	bDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(bDir, "admin-token"), []byte(e.hub.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := agenttest.StartHub(t, func(c *hub.Config) { c.TunnelListen, c.DataDir = "127.0.0.1:0", bDir; shared(c) })
	bAgentPort.Store(b.GRPCAddr())
	e.devShoot(t, "any")
	e.shootAPIServer(t, "dev", "any", echoTarget(t))
	sni := tunnel.ShootServerName("any", "dev", tunnel.DefaultDomain)
	ctx := context.Background()
	agenttest.Eventually(t, "replica b finds the agent's session in replica a, and the shoot in its watch cache", func() bool {
		addr, err := b.AgentLink().TunnelPeer(ctx, "local")
		code, _ := b.Do(t, "GET", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots/any", nil)
		return err == nil && addr == e.hub.TunnelAddr() && code == 200
	})
	if addr, err := e.hub.AgentLink().TunnelPeer(ctx, "local"); err != nil || addr != "" {
		t.Fatalf("replica a's peer for its own agent: %q %v, want none", addr, err)
	}

	c := dialShoot(t, b.TunnelAddr(), sni)
	echo(t, c, 1<<20)
	if out, in := hubMetric(t, b, "trellis_tunnel_forwarded_total", `kind="shoot-api"`, `direction="out"`), e.metric(t, "trellis_tunnel_forwarded_total", `kind="shoot-api"`, `direction="in"`); out != 1 || in != 1 {
		t.Errorf("forwarded: %v out of b, %v into a; want 1 and 1", out, in)
	}
	if open := e.metric(t, "trellis_tunnel_open", `kind="shoot-api"`); open != 1 {
		t.Errorf("open shoot-api tunnels in replica a: %v, want 1", open)
	}
	dataForwarded := hubMetric(t, b, "trellis_tunnel_data_connections_total", `result="forwarded"`)
	dataAccepted := e.metric(t, "trellis_tunnel_data_connections_total", `result="accepted"`)
	if dataForwarded != 1 || dataAccepted != 1 {
		t.Errorf("data connections: %v forwarded by b, %v accepted by a; want 1 and 1", dataForwarded, dataAccepted)
	}
	c.Close()

	// A data connection of no replica's tunnel is refused by the replica it reaches.
	preface, err := tunnelwire.DataPreface(strings.Repeat("0", tunnelwire.TunnelIDLen), make([]byte, tunnelwire.DataTokenLen))
	if err != nil {
		t.Fatal(err)
	}
	dc, err := net.DialTimeout("tcp", b.GRPCAddr(), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = dc.Write(preface)
	_ = dc.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, _ := dc.Read(make([]byte, 8)); n != 0 {
		t.Error("replica b answered a data connection of no tunnel")
	}
	dc.Close()
	if n := hubMetric(t, b, "trellis_tunnel_data_connections_total", `result="unknown"`); n != 1 {
		t.Errorf("replica b counted %v unknown data connections, want 1", n)
	}

	// A forwarded connection (the preface, then a ClientHello) on the replica without the agent: refused, not sent
	// back to the replica that has it.
	raw, err := net.DialTimeout("tcp", b.TunnelAddr(), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := io.WriteString(raw, "FORWARDED TRELLIS-TUNNEL/1\n"); err != nil {
		t.Fatal(err)
	}
	_ = raw.SetDeadline(time.Now().Add(30 * time.Second))
	if err := tls.Client(raw, &tls.Config{ServerName: sni, InsecureSkipVerify: true}).Handshake(); err == nil { //nolint:gosec // refused before any certificate
		t.Fatal("a forwarded connection to the replica without the agent reached the shoot")
	}
	agenttest.Eventually(t, "replica b counts the refusal", func() bool {
		return hubMetric(t, b, "trellis_tunnel_dial_failures_total", `kind="shoot-api"`, `reason="not-connected"`) == 1
	})
	if in := e.metric(t, "trellis_tunnel_forwarded_total", `kind="shoot-api"`, `direction="in"`); in != 1 {
		t.Errorf("forwarded into replica a: %v, want still 1", in)
	}

	// The seed API through replica b: b forwards the tunnel to replica a over TLS between the replicas (certificates
	// of the hub's CA), and the seed sees the hub user, impersonated by the agent.
	code, body := b.Do(t, "POST", tunnel.SeedAPIPath("local")+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
		`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`, "Content-Type", "application/json")
	if code != 201 || !strings.Contains(string(body), `"username":"trellis:admin"`) {
		t.Fatalf("seed API through replica b: %d %s", code, body)
	}
	if code, body := b.Do(t, "GET", tunnel.SeedAPIPath("local")+"/api/v1/namespaces/kube-system", nil); code != 200 || !strings.Contains(string(body), `"name":"kube-system"`) {
		t.Fatalf("seed API through replica b: %d %s", code, body)
	}
	if out, in := hubMetric(t, b, "trellis_tunnel_forwarded_total", `kind="seed-api"`, `direction="out"`), e.metric(t, "trellis_tunnel_forwarded_total", `kind="seed-api"`, `direction="in"`); out < 1 || out != in {
		t.Errorf("seed API tunnels forwarded: %v out of b, %v into a; want as many, at least 1", out, in)
	}
	// Only a replica's certificate opens one: the preface, then TLS with a client certificate of another name.
	raw, err = net.DialTimeout("tcp", e.hub.TunnelAddr(), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_, _ = io.WriteString(raw, "FORWARDED TRELLIS-SEED-API\n")
	_ = raw.SetDeadline(time.Now().Add(30 * time.Second))
	other := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{seedCert(t, e.hub, "local")}}) //nolint:gosec // refused on the client certificate
	if err := other.Handshake(); err == nil {
		if _, err = io.WriteString(other, "local\n"); err == nil {
			_, err = io.ReadFull(other, make([]byte, 3))
		}
		if err == nil {
			t.Fatal("a seed's certificate opened a forwarded seed API tunnel")
		}
	}
}
