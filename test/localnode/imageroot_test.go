package localnode

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// moduleTestbin is bin/testbin of the module root, or $KUBEBUILDER_ASSETS's directory when set (as seedtest finds it).
func moduleTestbin(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, "..", "..", "bin", "testbin")
}

// TestImageRootCopies builds an image root from two archives of testbin/images, copies it for two nodes, and checks
// that each copy is a containerd root with the images unpacked, that the copies share the blobs and layers with the
// root but not the databases, and that a node's containerd deleting an image (its garbage collector removing the
// blobs and snapshots) leaves the root and the other copy whole.
func TestImageRootCopies(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("unpacking layers with overlayfs needs root")
	}
	testbin := moduleTestbin(t)
	bins, err := findBinaries(testbin)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	t.Setenv(ImageRootCacheEnv, cache)
	roots, err := newImageRoots(bins)
	if err != nil {
		t.Fatal(err)
	}
	archives := []string{filepath.Join(testbin, "images", "pause.tar"), filepath.Join(testbin, "images", "busybox.tar")}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes := t.TempDir()
	a, b := filepath.Join(nodes, "a", "containerd"), filepath.Join(nodes, "b", "containerd")
	dir, built, err := roots.clone(ctx, archives, a)
	if err != nil {
		t.Fatal(err)
	}
	if !built {
		t.Fatalf("first copy: root %s reused, want it built", dir)
	}
	if dir, built, err = roots.clone(ctx, archives, b); err != nil {
		t.Fatal(err)
	}
	if built {
		t.Fatalf("second copy: root %s built, want it reused", dir)
	}
	root := filepath.Join(dir, "root")
	if _, _, err := roots.clone(ctx, archives, a); err == nil {
		t.Error("a copy over an existing root succeeded")
	}

	metaDB := filepath.Join("io.containerd.metadata.v1.bolt", "meta.db")
	blobs := filepath.Join("io.containerd.content.v1.content", "blobs", "sha256")
	rootMeta := digest(t, filepath.Join(root, metaDB))
	entries, err := os.ReadDir(filepath.Join(root, blobs))
	if err != nil || len(entries) == 0 {
		t.Fatalf("the root's blobs: %v, %v", entries, err)
	}
	for _, e := range entries {
		if !sameFile(t, filepath.Join(root, blobs, e.Name()), filepath.Join(a, blobs, e.Name())) {
			t.Errorf("blob %s is not shared with the copy", e.Name())
		}
	}
	if sameFile(t, filepath.Join(root, metaDB), filepath.Join(a, metaDB)) {
		t.Error("the copy's meta.db is the root's file")
	}

	c, err := startBareContainerd(ctx, bins.containerd, a, tWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.stop() }() // on a failure; the test stops it itself
	ctr := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, bins.ctr, append([]string{"--address", c.sock, "-n", "k8s.io"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	refs := strings.Fields(ctr("images", "ls", "-q"))
	busybox, pause := "", ""
	for _, r := range refs {
		switch {
		case strings.Contains(r, "/busybox:"):
			busybox = r
		case strings.Contains(r, "/pause:"):
			pause = r
		}
	}
	if busybox == "" || pause == "" {
		t.Fatalf("images in the copy: %v, want pause and busybox", refs)
	}
	// Complete and unpacked: ctr's columns STATUS ("complete (n/n)") and UNPACKED.
	for _, r := range []string{busybox, pause} {
		if out := ctr("images", "check", "name=="+r); !strings.Contains(out, "complete") || !strings.HasSuffix(strings.TrimSpace(out), "true") {
			t.Errorf("image %s in the copy: %s", r, out)
		}
	}
	if n := len(strings.Split(strings.TrimSpace(ctr("snapshots", "--snapshotter", "overlayfs", "ls")), "\n")) - 1; n < 2 {
		t.Errorf("%d snapshots in the copy, want the images' layers", n)
	}
	ctr("images", "rm", "--sync", busybox)
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(digest(t, filepath.Join(root, metaDB)), rootMeta) {
		t.Error("the copy's containerd changed the root's meta.db")
	}
	for _, e := range entries {
		for _, dir := range []string{root, b} {
			if _, err := os.Stat(filepath.Join(dir, blobs, e.Name())); err != nil {
				t.Errorf("after the copy deleted an image: %v", err)
			}
		}
	}
	left, _ := os.ReadDir(filepath.Join(a, blobs))
	if len(left) >= len(entries) {
		t.Errorf("the copy's garbage collector removed none of busybox's %d blobs (%d left)", len(entries)-len(left), len(left))
	}
}

// TestImageRootsRemoveUnused checks that building a root removes the roots unused for imageRootUnused, but not the
// recent ones or one whose lock is held.
func TestImageRootsRemoveUnused(t *testing.T) {
	dir := t.TempDir()
	r := &imageRoots{dir: dir}
	old := time.Now().Add(-imageRootUnused - time.Hour)
	mk := func(name string, used time.Time) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, name, "root"), 0o755); err != nil {
			t.Fatal(err)
		}
		done := filepath.Join(dir, name, "done")
		if err := os.WriteFile(done, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(done, used, used); err != nil {
			t.Fatal(err)
		}
	}
	mk("new", old)
	mk("stale", old)
	mk("recent", time.Now())
	mk("locked", old)
	lock, ok, err := tryLockFile(filepath.Join(dir, "locked.lock"))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	defer lock.Close()
	r.removeUnused("new")
	for name, want := range map[string]bool{"new": true, "stale": false, "recent": true, "locked": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("root %s: present %v, want %v", name, err == nil, want)
		}
	}
}

func digest(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return h[:]
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	var sa, sb syscall.Stat_t
	if err := syscall.Stat(a, &sa); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(b, &sb); err != nil {
		t.Fatal(err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
