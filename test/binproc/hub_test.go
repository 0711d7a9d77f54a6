package binproc_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/test/binproc"
)

// hubBinary builds trellis-hub for the test.
func hubBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs trellis-hub")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	if err := binproc.Build(ctx, dir, "github.com/trellis-dev/trellis/cmd/trellis-hub"); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "trellis-hub")
}

// TestHub runs the real hub: it is ready on a port of its own with the admin token read, answers the admin's REST
// request, comes back on the same address and data dir (the same token) after SIGKILL, and stops on SIGTERM; a hub
// that cannot start is reported with the end of its log.
func TestHub(t *testing.T) {
	bin := hubBinary(t)
	dir := t.TempDir()
	ctx := t.Context()
	h, err := binproc.StartHub(ctx, binproc.HubConfig{Bin: bin, DataDir: filepath.Join(dir, "data"), Args: []string{"--grpc-listen", ""}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Kill() })
	if h.Token == "" || h.Startup <= 0 || !h.Running() || !strings.HasPrefix(h.URL, "https://127.0.0.1:") {
		t.Fatalf("started hub: token %q, startup %s, running %v, URL %s", h.Token, h.Startup, h.Running(), h.URL)
	}
	code, body, err := h.Do(ctx, http.MethodGet, "/api/v1/namespaces", nil)
	if err != nil || code != http.StatusOK || !strings.Contains(string(body), `"kind":"NamespaceList"`) {
		t.Fatalf("GET namespaces: %d %.200s %v", code, body, err)
	}
	if out, _ := h.LogSinceStart(); !strings.Contains(out, "hub ready") {
		t.Errorf("the log of the run lacks the hub's ready line:\n%s", out)
	}

	pid, token, addr := h.PID(), h.Token, h.Addr()
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	if h.Running() || h.Err() == nil {
		t.Fatalf("after SIGKILL: running %v, exit %v", h.Running(), h.Err())
	}
	if err := h.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if h.PID() == pid || h.Token != token || h.Addr() != addr {
		t.Errorf("restart: pid %d (was %d), token changed %v, address %s (was %s)", h.PID(), pid, h.Token != token, h.Addr(), addr)
	}
	if code, _, err := h.Do(ctx, http.MethodGet, "/api/v1/namespaces", nil); err != nil || code != http.StatusOK {
		t.Errorf("GET namespaces after the restart: %d %v", code, err)
	}
	if err := h.Stop(30 * time.Second); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
	if h.Running() {
		t.Error("the hub runs after Stop")
	}

	badLog := filepath.Join(dir, "bad.log")
	_, err = binproc.StartHub(ctx, binproc.HubConfig{Bin: bin, DataDir: filepath.Join(dir, "bad"), LogPath: badLog, Args: []string{"--no-such-flag"}})
	if err == nil || !strings.Contains(err.Error(), "exited while starting: exit status 2") ||
		!strings.HasSuffix(err.Error(), binproc.TailLines(badLog, 1)) {
		t.Errorf("a hub with an unknown flag: %v, want an exit while starting with the end of the log %s", err, badLog)
	}
	if all, _ := os.ReadFile(badLog); strings.Count(string(all), "=== trellis-hub start") != 1 {
		t.Errorf("a start that failed for another reason than a taken port was tried again:\n%s", all)
	}
}

// TestFreeAddrsAreDistinct takes many addresses at once: no two share a port (the kernel hands out a closed
// listener's port again, which once gave an etcd member's client URL the port of another member's peer URL), and
// each port can be listened on afterwards.
func TestFreeAddrsAreDistinct(t *testing.T) {
	addrs, err := binproc.FreeAddrs(500)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
	for _, a := range addrs[:10] {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("listen on a free address: %v", err)
		}
		_ = l.Close()
	}
}
