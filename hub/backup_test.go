package hub_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/backup"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// objectRV creates an object over REST and returns its resourceVersion.
func objectRV(t *testing.T, h *hubtest.Hub, path, body string) string {
	t.Helper()
	code, out := h.Do(t, "POST", path, body)
	if code != http.StatusCreated {
		t.Fatalf("POST %s: %d %s", path, code, out)
	}
	var obj struct {
		Metadata struct{ ResourceVersion string }
	}
	if err := json.Unmarshal(out, &obj); err != nil || obj.Metadata.ResourceVersion == "" {
		t.Fatalf("POST %s: %v %s", path, err, out)
	}
	return obj.Metadata.ResourceVersion
}

func snapshots(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "garden-*.db"))
	return m
}

// TestBackupRestore: the leader snapshots the garden on schedule with retention; a snapshot restored into a wiped
// data directory brings every object back with its resourceVersion, and a client's old resourceVersion is either
// valid or 410 Expired — never silently another state.
func TestBackupRestore(t *testing.T) {
	dataDir, backupDir, copyDir := t.TempDir(), t.TempDir(), t.TempDir()
	var kept, late string
	rvs := map[string]string{}
	t.Run("backup", func(t *testing.T) {
		h := hubtest.Start(t, func(c *hub.Config) {
			c.DataDir = dataDir
			c.BackupDir, c.BackupInterval, c.BackupKeep = backupDir, 200*time.Millisecond, 2
		})
		h.Do(t, "POST", "/api/v1/namespaces", `{"metadata":{"name":"kept"}}`)
		h.WaitNamespace(t, "kept")
		rvs["/api/v1/namespaces/kept/secrets/s"] = objectRV(t, h, "/api/v1/namespaces/kept/secrets", `{"metadata":{"name":"s"},"data":{"k":"dmFsdWU="}}`)
		rvs["/api/v1/namespaces/kept/configmaps/c"] = objectRV(t, h, "/api/v1/namespaces/kept/configmaps", `{"metadata":{"name":"c"},"data":{"k":"v"}}`)
		// The project's controller updates it (its status), so its resourceVersion is not compared: only that it is back.
		objectRV(t, h, "/apis/core.gardener.cloud/v1beta1/projects", `{"metadata":{"name":"kept"},"spec":{"namespace":"kept"}}`)
		written := time.Now()
		// Wait for a snapshot taken after the writes, and for retention to have had something to delete.
		seen := map[string]bool{}
		deadline := time.Now().Add(20 * time.Second)
		for kept == "" || len(seen) <= 3 {
			if time.Now().After(deadline) {
				t.Fatalf("snapshots seen: %v", seen)
			}
			// A new snapshot is stored before retention deletes the oldest: for that moment there are three.
			names := snapshots(t, backupDir)
			if len(names) > 3 {
				t.Fatalf("retention keeps 2 (3 while a new one is taken), found %v", names)
			}
			for _, n := range names {
				seen[n] = true
				if fi, err := os.Stat(n); err == nil && fi.ModTime().After(written.Add(50*time.Millisecond)) && kept == "" {
					kept = filepath.Join(copyDir, "kept.db")
					copyFile(t, n, kept)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Between snapshots retention has left two.
		for names := snapshots(t, backupDir); len(names) > 2; names = snapshots(t, backupDir) {
			if time.Now().After(deadline) {
				t.Fatalf("retention keeps 2, found %v", names)
			}
			time.Sleep(10 * time.Millisecond)
		}
		// A write the restore will undo: a client holding its resourceVersion must not resume silently.
		late = objectRV(t, h, "/api/v1/namespaces/kept/configmaps", `{"metadata":{"name":"late"}}`)
		if code, out := h.Do(t, "GET", "/metrics", nil); code != 200 || !strings.Contains(string(out), `trellis_backup_snapshots_total{result="success"}`) {
			t.Errorf("metrics: %d, no backup counter", code)
		}
	})
	if kept == "" {
		t.FailNow()
	}

	if err := hub.Restore(context.Background(), kept, dataDir); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("restore over existing etcd data: %v", err)
	}
	if err := os.RemoveAll(filepath.Join(dataDir, "etcd")); err != nil {
		t.Fatal(err)
	}
	if err := hub.Restore(context.Background(), kept, dataDir); err != nil {
		t.Fatal(err)
	}

	h := hubtest.Start(t, func(c *hub.Config) { c.DataDir = dataDir })
	for path, rv := range rvs {
		code, out := h.Do(t, "GET", path, nil)
		var obj struct {
			Metadata struct{ ResourceVersion string }
		}
		_ = json.Unmarshal(out, &obj)
		if code != 200 || obj.Metadata.ResourceVersion != rv {
			t.Errorf("%s after restore: %d, resourceVersion %q, want %q", path, code, obj.Metadata.ResourceVersion, rv)
		}
	}
	if code, _ := h.Do(t, "GET", "/apis/core.gardener.cloud/v1beta1/projects/kept", nil); code != 200 {
		t.Errorf("project after restore: %d", code)
	}
	if code, out := h.Do(t, "GET", "/api/v1/namespaces/kept/secrets/s", nil); !strings.Contains(string(out), "dmFsdWU=") {
		t.Errorf("restored secret (encrypted at rest) not readable: %d %s", code, out)
	}
	if code, _ := h.Do(t, "GET", "/api/v1/namespaces/kept/configmaps/late", nil); code != http.StatusNotFound {
		t.Errorf("write after the snapshot: %d, want 404", code)
	}
	cms := kcorev1.NewConfigMapServiceClient(h.GRPC(t))
	for _, rv := range []string{late, rvs["/api/v1/namespaces/kept/configmaps/c"]} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		w, err := cms.Watch(ctx, &metav1.WatchRequest{Namespace: "kept", ResourceVersion: rv}, grpc.WaitForReady(true))
		if err == nil {
			_, err = w.Recv()
		}
		cancel()
		if status.Code(err) != codes.OutOfRange {
			t.Errorf("watch from resourceVersion %s after restore: %v, want OutOfRange (410 Expired)", rv, err)
		}
	}
	newRV, _ := strconv.ParseInt(objectRV(t, h, "/api/v1/namespaces/kept/configmaps", `{"metadata":{"name":"after"}}`), 10, 64)
	if lateRV, _ := strconv.ParseInt(late, 10, 64); newRV < backup.RevisionBump || newRV <= lateRV {
		t.Errorf("a write after the restore got resourceVersion %d, not past the bump", newRV)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
