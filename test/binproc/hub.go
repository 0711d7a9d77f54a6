package binproc

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/trellis-dev/trellis/test/timescale"
)

// HubConfig says how to run trellis-hub.
type HubConfig struct {
	// Bin is the trellis-hub binary.
	Bin string
	// DataDir is its --data-dir, where it keeps its etcd, its PKI (pki/ca.crt) and the admin token (admin-token).
	DataDir string
	// Addr is its --listen address; empty picks a free loopback port (and another if that one was taken meanwhile).
	Addr string
	// Args are more flags, such as --grpc-listen "". Unless they or PickListen name --tunnel-listen, the hub runs
	// without its TLS-passthrough listener, whose fixed default port (127.0.0.1:8445) several hubs on one machine
	// would share.
	Args []string
	// PickListen names more listener flags (--grpc-listen, --tunnel-listen) to give free loopback addresses, chosen
	// with --listen's when Addr is empty and chosen again with it when one was taken meanwhile (Hub.Listen).
	PickListen []string
	// Env is added to the parent's environment (GOMEMLIMIT=...).
	Env []string
	// LogPath receives its output, appended; default <DataDir>/../hub.log.
	LogPath string
	// ReadyTimeout bounds the wait for /readyz; default 20 s.
	ReadyTimeout time.Duration
	// Probe, if set, is told the outcome of each /readyz probe: when it was sent after the start, how long it took,
	// and the status code or error.
	Probe func(at, took time.Duration, code int, err error)
	// Exited is passed on to the Process.
	Exited func(name string, err error)
}

// Hub is a running trellis-hub. Start it with StartHub; Restart runs it again on the same data dir and address.
type Hub struct {
	*Process
	cfg HubConfig
	// URL is https://<Addr>.
	URL string
	// Listen holds the addresses StartHub chose for HubConfig.PickListen, by flag.
	Listen map[string]string
	// Pool holds the hub's CA certificate, and Token is the admin token; both are read when the hub is ready.
	Pool  *x509.CertPool
	Token string
	// HTTP is a client of the hub that trusts its CA (HTTP/2, 30 s timeout).
	HTTP *http.Client
	// Startup is how long the last start took, from the process's start to /readyz answering 200.
	Startup time.Duration

	// What IsLeader has read of the current run's log.
	leaderMu   sync.Mutex
	leaderRun  time.Time // the run whose log was read
	leaderRead int64     // bytes read
	leading    bool
}

// StartHub runs the hub and waits until /readyz answers 200 and the admin token is there. On failure the process is
// stopped and the error carries the end of its log.
func StartHub(ctx context.Context, cfg HubConfig) (*Hub, error) {
	if cfg.LogPath == "" {
		cfg.LogPath = filepath.Join(filepath.Dir(filepath.Clean(cfg.DataDir)), "hub.log")
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = timescale.Scale(20 * time.Second)
	}
	pick := cfg.Addr == "" || len(cfg.PickListen) > 0
	base := cfg
	var lastErr error
	for range 3 {
		cfg = base
		picked := map[string]string{}
		if pick {
			addrs, err := FreeAddrs(1 + len(cfg.PickListen))
			if err != nil {
				return nil, err
			}
			if cfg.Addr == "" {
				cfg.Addr = addrs[0]
			}
			for i, flag := range cfg.PickListen {
				picked[flag] = addrs[i+1]
				cfg.Args = append(cfg.Args[:len(cfg.Args):len(cfg.Args)], flag, addrs[i+1])
			}
		}
		h := &Hub{cfg: cfg, URL: "https://" + cfg.Addr, Listen: picked}
		h.Process = New(Config{Name: "trellis-hub", Path: cfg.Bin, Args: append(append([]string{"--data-dir", cfg.DataDir, "--listen", cfg.Addr}, noTunnelListener(cfg.Args)...), cfg.Args...),
			Env: cfg.Env, LogPath: cfg.LogPath, Exited: cfg.Exited})
		if lastErr = h.Restart(ctx); lastErr == nil {
			return h, nil
		}
		// Another process may take a free port before the hub binds it: then, and only then, try another.
		out, _ := h.LogSinceStart()
		if !pick || ctx.Err() != nil || !strings.Contains(out, "address already in use") {
			break
		}
	}
	return nil, lastErr
}

// Restart starts the hub again (after Stop or Kill) and waits until it is ready, as StartHub does.
func (h *Hub) Restart(ctx context.Context) error {
	if h.HTTP != nil {
		h.HTTP.CloseIdleConnections() // connections to an earlier process are of no use
	}
	h.HTTP = nil
	if err := h.Start(); err != nil {
		return err
	}
	done, start := h.Done()
	err := h.waitReady(ctx, done, start)
	if err != nil {
		_ = h.Stop(10 * time.Second)
		return err
	}
	h.Startup = time.Since(start)
	return nil
}

func (h *Hub) waitReady(ctx context.Context, exited <-chan struct{}, start time.Time) error {
	deadline := time.Now().Add(h.cfg.ReadyTimeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("hub on %s exited while starting: %v; log:\n%s", h.cfg.Addr, h.Err(), h.TailLines(30))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("hub on %s not ready within %s; log:\n%s", h.cfg.Addr, h.cfg.ReadyTimeout, h.TailLines(30))
		}
		// The CA certificate is written before the hub listens; until then there is nothing to probe.
		if h.HTTP != nil || h.loadCA() == nil {
			t := time.Now()
			code, err := h.ready(ctx)
			if h.cfg.Probe != nil {
				h.cfg.Probe(t.Sub(start), time.Since(t), code, err)
			}
			if code == http.StatusOK {
				h.Token, err = AdminToken(h.cfg.DataDir)
				return err
			}
		}
		time.Sleep(2 * time.Millisecond) // benchmarks report the start-up time: keep the probe's resolution fine
	}
}

// loadCA reads the hub's CA certificate and makes the client that trusts it.
func (h *Hub) loadCA() error {
	pool, err := LoadCA(h.CAFile())
	if err != nil {
		return err
	}
	h.Pool, h.HTTP = pool, HTTPClient(pool, 30*time.Second)
	return nil
}

func (h *Hub) ready(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL+"/readyz", nil)
	if err != nil {
		return 0, err
	}
	resp, err := h.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Addr is the hub's --listen address.
func (h *Hub) Addr() string { return h.cfg.Addr }

// DataDir is the hub's --data-dir.
func (h *Hub) DataDir() string { return h.cfg.DataDir }

// CAFile is the hub's CA certificate in its data dir.
func (h *Hub) CAFile() string { return filepath.Join(h.cfg.DataDir, "pki", "ca.crt") }

// Do sends a REST request as the admin; see Do.
func (h *Hub) Do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	return Do(ctx, h.HTTP, method, h.URL+path, h.Token, body)
}

// Do sends a REST request with c, with the bearer token (none when empty), and reads the whole answer; a body is
// sent as JSON (as a JSON merge patch for PATCH). err is set only when no answer arrived.
func Do(ctx context.Context, c *http.Client, method, url, token string, body []byte) (int, []byte, error) {
	req, err := Request(ctx, method, url, token, body)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// Request is the request Do sends.
func Request(ctx context.Context, method, url, token string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		ct := "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
		req.Header.Set("Content-Type", ct)
	}
	return req, nil
}

// LoadCA reads a CA certificate file, such as the hub's <data dir>/pki/ca.crt (written before the hub listens).
func LoadCA(caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificate", caFile)
	}
	return pool, nil
}

// HTTPClient is a client of the hub that trusts pool (TLS 1.2 at least, HTTP/2), each request bounded by timeout
// (0: unbounded).
func HTTPClient(pool *x509.CertPool, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}}
}

// AdminToken reads the admin token of the hub with data dir dataDir (it writes it on its first start).
func AdminToken(dataDir string) (string, error) {
	t, err := os.ReadFile(filepath.Join(dataDir, "admin-token"))
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	return strings.TrimSpace(string(t)), nil
}

// FreeAddr returns a loopback address with a port nobody listens on now.
func FreeAddr() (string, error) {
	addrs, err := FreeAddrs(1)
	if err != nil {
		return "", err
	}
	return addrs[0], nil
}

// FreeAddrs returns n loopback addresses with distinct ports nobody listens on now. Each port's listener stays open
// until all are chosen: the kernel may hand out a port again once its listener is closed, and two of a process's
// addresses (an etcd member's client and another's peer URL) then collide.
func FreeAddrs(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// noTunnelListener returns the flag that turns the hub's TLS-passthrough listener off, unless args set it.
func noTunnelListener(args []string) []string {
	for _, a := range args {
		if a == "--tunnel-listen" || strings.HasPrefix(a, "--tunnel-listen=") {
			return nil
		}
	}
	return []string{"--tunnel-listen", ""}
}
