package tunnel_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/hub/tunnel"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/seedtest"
	"github.com/trellis-dev/trellis/test/timescale"
)

// backWithin bounds how long after the restarted hub is ready new tunnels must work: the agent's reconnect and a
// tunnel's set-up, on a busy machine (scaled by timescale: under make test's load on two cores, 10.5 s after a SIGKILL
// was seen once). The agent runs with its default reconnect backoff: while the hub is away its connects are refused,
// and after a refused connect it waits at most a second (backoff.Backoff.RefusedMax).
var backWithin = timescale.Scale(10 * time.Second)

// TestHubRestart: the hub is a real trellis-hub process, stopped with SIGTERM and, in a second round, with SIGKILL,
// then started again on the same data dir. Open tunnels — a kubectl watch and a raw watch on the seed API, a TLS
// connection through the shoot API listener — end with an error at their clients, not a hang; the agent reconnects by
// itself; new tunnels of both kinds work within backWithin of the hub's return; and the agent's goroutines and file
// descriptors come back to what they were (nothing of the broken tunnels stays behind).
func TestHubRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h := agenttest.StartHubProcessListening(t, dir, []string{"--grpc-listen", "--tunnel-listen"}, "--heartbeat-interval", "500ms")
	grpcAddr, tunnelAddr := h.Listen["--grpc-listen"], h.Listen["--tunnel-listen"]

	// The seed and its agent, in this process.
	cluster := seedtest.Start(t)
	proxy := &serviceProxy{routes: map[string]string{}}
	agenttest.StartAgentOn(t, h, grpcAddr, "local", agenttest.SeedSpec, cluster, nil,
		func(c *agent.Config) { c.DialService = proxy.dial })

	// The example shoot, placed on the seed, and a stand-in for its kube-apiserver behind its Service.
	project, shoot, svcAddr := agenttest.ShootOn(t, h, cluster, "local")
	srv, pool := standIn(t)
	proxy.route(svcAddr, srv.Listener.Addr().String())
	sni := tunnel.ShootServerName(shoot, project, tunnel.DefaultDomain)
	dialShoot := func() (*tls.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", tunnelAddr, &tls.Config{ServerName: sni,
			InsecureSkipVerify: true, //nolint:gosec // verified against the stand-in's own name below
			VerifyConnection: func(cs tls.ConnectionState) error {
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: "example.com"})
				return err
			}, NextProtos: []string{"http/1.1"}})
	}
	shootGet := func(c *tls.Conn) error {
		if _, err := io.WriteString(c, "GET /version HTTP/1.1\r\nHost: "+sni+"\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10)); !strings.Contains(string(b), "stand-in") {
			return &errAnswer{string(b)}
		}
		return nil
	}

	kubectl := kubectlPath(t)
	kc := filepath.Join(dir, "seed.kubeconfig")
	writeKubeconfig(t, kc, h.URL+tunnel.SeedAPIPath("local"), h.CAFile(), h.Token)
	seedAPI := func() error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(cctx, kubectl, "--kubeconfig", kc, "--request-timeout", "5s", "get", "namespace", "default", "-o", "name").CombinedOutput()
		if err != nil {
			return &errAnswer{strings.TrimSpace(string(out))}
		}
		return nil
	}
	shootAPI := func() error {
		c, err := dialShoot()
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return shootGet(c)
	}
	waitFor := func(what string, f func() error) time.Duration {
		start := time.Now()
		var err error
		for time.Since(start) < 60*time.Second {
			if err = f(); err == nil {
				return time.Since(start)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s: still failing after 60 s: %v", what, err)
		return 0
	}
	waitFor("the seed API through the hub", seedAPI)
	waitFor("the shoot API through the hub", shootAPI)
	baseGoroutines, baseFDs := runtime.NumGoroutine(), openFDs(t)

	for _, how := range []string{"SIGTERM", "SIGKILL"} {
		// Open tunnels: a kubectl watch, a raw watch (its end seen byte for byte) and a passthrough connection.
		watch := exec.Command(kubectl, "--kubeconfig", kc, "get", "configmaps", "-A", "-w", "-o", "name")
		stdout, err := watch.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := watch.Start(); err != nil {
			t.Fatal(err)
		}
		listed := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			first := true
			for sc.Scan() {
				if first {
					close(listed)
					first = false
				}
			}
		}()
		select {
		case <-listed:
		case <-time.After(30 * time.Second):
			_ = watch.Process.Kill()
			t.Fatal("the kubectl watch listed nothing")
		}
		watchEnded := make(chan error, 1)
		go func() { watchEnded <- watch.Wait() }()
		req, _ := http.NewRequest("GET", h.URL+tunnel.SeedAPIPath("local")+"/api/v1/configmaps?watch=1", nil)
		req.Header.Set("Authorization", "Bearer "+h.Token)
		resp, err := (&http.Client{Transport: h.HTTP.Transport}).Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("raw watch: %v %v", resp, err)
		}
		rawEnded := make(chan error, 1)
		go func() { _, err := io.Copy(io.Discard, resp.Body); resp.Body.Close(); rawEnded <- err }()
		pass, err := dialShoot()
		if err != nil {
			t.Fatal(err)
		}
		if err := shootGet(pass); err != nil {
			t.Fatal(err)
		}
		passEnded := make(chan error, 1)
		go func() { _, err := pass.Read(make([]byte, 1)); passEnded <- err }()

		// Stop the hub.
		if how == "SIGTERM" {
			err = h.Stop(20 * time.Second)
		} else {
			err = h.Kill()
		}
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		for what, ch := range map[string]chan error{"the raw watch": rawEnded, "the passthrough connection": passEnded, "the kubectl watch": watchEnded} {
			select {
			case err := <-ch:
				if err == nil && what != "the kubectl watch" {
					t.Errorf("%s: %s ended cleanly; want an error", how, what)
				}
				t.Logf("%s: %s ended: %v", how, what, err)
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: %s hangs after the hub went", how, what)
			}
		}
		pass.Close()
		// While the hub is away, the client sees an error at once, not a hang.
		if err := seedAPI(); err == nil {
			t.Fatalf("%s: the seed API answered without a hub", how)
		}

		// Start it again on the same data dir.
		if err := h.Restart(ctx); err != nil {
			t.Fatalf("restart after %s: %v", how, err)
		}
		seedBack := waitFor("the seed API after the restart", seedAPI)
		shootBack := waitFor("the shoot API after the restart", shootAPI)
		t.Logf("%s: hub ready after %s; seed API through it after %s more, shoot API after %s more", how,
			h.Startup.Round(time.Millisecond), seedBack.Round(time.Millisecond), (seedBack + shootBack).Round(time.Millisecond))
		if seedBack+shootBack > backWithin {
			t.Errorf("%s: new tunnels took %s after the hub was ready; want at most %s", how, seedBack+shootBack, backWithin)
		}
	}

	// Nothing of the broken tunnels stays in this process (the agent, the clients): goroutines and descriptors come
	// back to about what they were with the agent connected and no tunnel open.
	h.HTTP.CloseIdleConnections()
	var g, fds int
	agenttest.Eventually(t, "goroutines and file descriptors back to the start", func() bool {
		g, fds = runtime.NumGoroutine(), openFDs(t)
		return g <= baseGoroutines+10 && fds <= baseFDs+5
	})
	t.Logf("goroutines %d (at the start %d), file descriptors %d (at the start %d)", g, baseGoroutines, fds, baseFDs)
}

// errAnswer is an unexpected answer.
type errAnswer struct{ body string }

func (e *errAnswer) Error() string { return "unexpected answer: " + e.body }

// openFDs is the number of file descriptors this process holds.
func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

// writeKubeconfig writes a kubeconfig for server, verified with caFile, with token.
func writeKubeconfig(t *testing.T, path, server, caFile, token string) {
	t.Helper()
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server + "\n    certificate-authority: " + caFile +
		"\nusers:\n- name: u\n  user:\n    token: " + token + "\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}
