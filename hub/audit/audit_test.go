package audit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/trellis-dev/trellis/hub/auth"
)

const everything = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// request runs one non-resource request through an auditor as an edge does.
func request(a *Auditor, id, path string) {
	ctx := a.Begin(context.Background(), Request{ID: id, URI: path, Path: path, Verb: "get"})
	SetUser(ctx, auth.User{Name: "alice", Groups: []string{"devs"}})
	Finish(ctx, http.StatusOK, nil, nil, false)
}

// TestRotation: the log file is rotated at --audit-log-maxsize and only --audit-log-maxbackup old files are kept.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "audit.log")
	a, err := New(Config{PolicyFile: writeFile(t, dir, "policy.yaml", everything), LogPath: logPath, LogMaxSize: 1, LogMaxBackups: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	long := "/" + strings.Repeat("x", 2000) // about 2.5 KB per event with the rest of it
	for i := range 2000 {                   // about 5 MB: four rotations at 1 MB
		request(a, fmt.Sprintf("req-%d", i), long)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The rotating writer removes backups beyond maxbackup in a goroutine of its own after each rotation.
	var matches []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		matches, _ = filepath.Glob(filepath.Join(dir, "audit-*.log"))
		if len(matches) == 2 || time.Now().After(deadline) {
			break
		}
	}
	if len(matches) != 2 {
		t.Fatalf("want 2 rotated files (maxbackup), got %v", matches)
	}
	for _, f := range append(matches, logPath) {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 1<<20 {
			t.Errorf("%s: %d bytes, more than maxsize 1 MB", f, fi.Size())
		}
	}
	// The newest events are in the current file, whole lines of audit.k8s.io/v1 Events.
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	var last auditv1.Event
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.AuditID != "req-1999" || last.User.Username != "alice" {
		t.Errorf("last event %+v (%v)", last, err)
	}
}

// TestWebhook sends the events to a real local HTTPS server named by a kubeconfig, as kube-apiserver's
// --audit-webhook-config-file.
func TestWebhook(t *testing.T) {
	var mu sync.Mutex
	var got []auditv1.Event
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var list auditv1.EventList
		if err := json.Unmarshal(body, &list); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.Header.Get("Authorization") != "Bearer webhook-token" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		got = append(got, list.Items...)
		mu.Unlock()
	}))
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	dir := t.TempDir()
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: audit
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: hub
  user:
    token: webhook-token
contexts:
- name: default
  context: {cluster: audit, user: hub}
current-context: default
`, srv.URL, b64(caPEM))
	a, err := New(Config{PolicyFile: writeFile(t, dir, "policy.yaml", everything), WebhookConfigFile: writeFile(t, dir, "webhook.yaml", kubeconfig),
		WebhookBatchMaxWait: 50 * time.Millisecond, WebhookInitialBackoff: 50 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	for i := range 3 {
		request(a, fmt.Sprintf("hooked-%d", i), "/metrics")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 6 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	complete := map[string]bool{}
	for _, ev := range got {
		if ev.Stage == auditv1.StageResponseComplete && ev.User.Username == "alice" && ev.ResponseStatus != nil && ev.ResponseStatus.Code == 200 {
			complete[string(ev.AuditID)] = true
		}
	}
	if len(complete) != 3 {
		t.Fatalf("webhook received %d events, complete for %v; want hooked-0..2", len(got), complete)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{LogPath: "x"}, "audit-policy-file: required"},
		{Config{PolicyFile: "p", LogPath: "x", LogMaxAge: -1}, "audit-log-maxage"},
		{Config{PolicyFile: "p", LogPath: "x", LogMaxSize: -1}, "audit-log-maxsize"},
		{Config{PolicyFile: "p", LogPath: "x", LogMaxBackups: -1}, "audit-log-maxbackup"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("no audit log: %v", err)
	}
	dir := t.TempDir()
	_, err := New(Config{PolicyFile: writeFile(t, dir, "p.yaml", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n"), LogPath: "-"}, nil)
	if err == nil || !strings.Contains(err.Error(), "audit-policy-file") {
		t.Errorf("bad policy level: %v", err)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
