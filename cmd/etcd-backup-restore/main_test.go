package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/trellis-dev/trellis/hub/backup"
)

// TestDecide: an existing member is kept whatever the store holds; without one the newest snapshot is restored, and
// with no snapshot etcd starts fresh.
func TestDecide(t *testing.T) {
	snaps := []backup.Object{{Name: "full-1.db"}, {Name: "full-2.db"}}
	for _, tc := range []struct {
		name      string
		member    bool
		snaps     []backup.Object
		want      action
		wantSnaps string
	}{
		{"member and snapshots", true, snaps, keep, ""},
		{"member, empty store", true, nil, keep, ""},
		{"no member, snapshots", false, snaps, restore, "full-2.db"},
		{"no member, empty store", false, nil, fresh, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, snap := decide(tc.member, tc.snaps)
			if got != tc.want || snap.Name != tc.wantSnaps {
				t.Fatalf("decide = %v %q, want %v %q", got, snap.Name, tc.want, tc.wantSnaps)
			}
		})
	}
}

// TestNextSnapshot: the first snapshot is due at once, a stale one too, a recent one an interval after it.
func TestNextSnapshot(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		newest time.Time
		has    bool
		want   time.Duration
	}{
		{"empty store", time.Time{}, false, 0},
		{"stale", now.Add(-2 * time.Hour), true, 0},
		{"exactly an interval old", now.Add(-time.Hour), true, 0},
		{"recent", now.Add(-10 * time.Minute), true, 50 * time.Minute},
		{"clock skew: in the future", now.Add(time.Minute), true, 61 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextSnapshot(tc.newest, tc.has, now, time.Hour); got != tc.want {
				t.Fatalf("nextSnapshot = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCommandLine: bad flags are usage errors naming the flag.
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"restore", "--store", "s"}, "--data-dir: required"},
		{[]string{"restore", "--data-dir", "d", "--store", "s", "--owner", "x"}, `--owner: "x" is not UID:GID`},
		{[]string{"server"}, "--store: required"},
		{[]string{"server", "--store", "s", "--interval", "0s"}, "--interval: 0s is not positive"},
		{[]string{"server", "--store", "s", "--keep", "0"}, "--keep: 0"},
		{[]string{"server", "--store", "s", "--cert", "c"}, "--cert and --key"},
		{[]string{"what"}, `unknown command "what"`},
	} {
		var out bytes.Buffer
		if code := run(context.Background(), tc.args, &out); code != 2 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: exit %d, output %q, want 2 and %q", tc.args, code, out.String(), tc.want)
		}
	}
}

// startEtcd starts an embedded etcd member on dir with free loopback ports and returns a client of it.
func startEtcd(t *testing.T, dir string) *clientv3.Client {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.Name = "etcd-main-0"
	cfg.LogLevel = "error"
	u := func(s string) []url.URL { p, _ := url.Parse(s); return []url.URL{*p} }
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = u("http://127.0.0.1:0"), u("http://127.0.0.1:0")
	cfg.ListenPeerUrls = u("http://127.0.0.1:0")
	cfg.AdvertisePeerUrls = u("http://127.0.0.1:2380")
	cfg.InitialCluster = "etcd-main-0=http://127.0.0.1:2380"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Clients[0].Addr().String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// TestSnapshotAndRestore: the sidecar takes a scheduled snapshot at its start and another on POST /snapshot/full,
// keeps --keep of them, names the newest at /snapshot/latest; restore brings the newest back into an empty data
// directory, which a new etcd serves with the data of the last snapshot, and leaves a data directory with a member
// alone.
func TestSnapshotAndRestore(t *testing.T) {
	ctx := t.Context()
	dir, store := t.TempDir(), filepath.Join(t.TempDir(), "entry")
	cli := startEtcd(t, filepath.Join(dir, "source"))
	if _, err := cli.Put(ctx, "/registry/configmaps/demo/kept", "42"); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	o, err := parseServer([]string{"--store", store, "--endpoints", cli.Endpoints()[0], "--listen", "127.0.0.1:0", "--keep", "2", "--interval", "1h"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o.ready = ready
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- o.run(sctx, slog.New(slog.DiscardHandler)) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	}()
	base := "http://" + <-ready
	healthy := func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	for deadline := time.Now().Add(30 * time.Second); !healthy(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no scheduled snapshot at the start")
		}
	}
	full := func() snapshotResult {
		t.Helper()
		resp, err := http.Post(base+"/snapshot/full", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r snapshotResult
		if err := json.NewDecoder(resp.Body).Decode(&r); resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("POST /snapshot/full: %d %v", resp.StatusCode, err)
		}
		return r
	}
	if _, err := cli.Put(ctx, "/registry/configmaps/demo/later", "43"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // snapshot names have millisecond resolution
	full()
	time.Sleep(2 * time.Millisecond)
	last := full()
	objs, err := backup.Dir(store).List(ctx)
	if err != nil || len(objs) != 2 || objs[1].Name != last.Name || last.SizeBytes == 0 {
		t.Fatalf("store after three snapshots with --keep 2: %v %v; the last: %+v", objs, err, last)
	}
	resp, err := http.Get(base + "/snapshot/latest")
	if err != nil {
		t.Fatal(err)
	}
	var latest snapshotResult
	_ = json.NewDecoder(resp.Body).Decode(&latest)
	resp.Body.Close()
	if latest.Name != last.Name {
		t.Fatalf("/snapshot/latest = %q, want %q", latest.Name, last.Name)
	}

	restored := filepath.Join(dir, "restored", "new.etcd")
	if err := os.MkdirAll(restored, 0o700); err != nil { // a provisioned volume: the directory, no member
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := run(ctx, []string{"restore", "--data-dir", restored, "--store", store, "--owner", "0:0"}, &out); code != 0 {
		t.Fatalf("restore: exit %d\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "action=restore") {
		t.Fatalf("restore did not restore:\n%s", out.String())
	}
	out.Reset()
	if code := run(ctx, []string{"restore", "--data-dir", restored, "--store", store}, &out); code != 0 || !strings.Contains(out.String(), "action=keep") {
		t.Fatalf("a second restore into the member: exit %d\n%s", code, out.String())
	}
	cli2 := startEtcd(t, restored)
	for k, want := range map[string]string{"/registry/configmaps/demo/kept": "42", "/registry/configmaps/demo/later": "43"} {
		r, err := cli2.Get(ctx, k)
		if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != want {
			t.Fatalf("restored %s: %v %v, want %s", k, r, err, want)
		}
	}
}
