package localnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ImageRootCacheEnv names the directory of the machine's image roots (see imageRoots); "off" imports every node's
// images anew. Unset: <user cache dir>/trellis/node-images.
const ImageRootCacheEnv = "TRELLIS_NODE_IMAGE_CACHE"

// imageRootUnused is how long an image root may go unused before a node that builds another removes it.
const imageRootUnused = 7 * 24 * time.Hour

// imageRoots keeps, per machine, containerd roots that hold the images of testbin/images already imported and
// unpacked, one per set of archives (keyed by their manifests and the containerd binary), so that a node starts from
// a copy instead of importing (about 12 CPU-seconds and 15–50 s for a seed node's control plane images here): the
// copy hard-links the content blobs and the unpacked layers, which neither containerd nor overlayfs ever writes (a
// container writes to its own upper directory), and copies the bolt databases, which the node's containerd writes.
// The root must be on the file system of the node's state directory; where it is not, or when anything of this
// fails, the node imports its images as before.
type imageRoots struct {
	dir                   string
	containerdBin, ctrBin string // what builds a root
}

// newImageRoots returns the machine's image roots for the node's binaries; nil when turned off.
func newImageRoots(bins binaries) (*imageRoots, error) {
	dir := os.Getenv(ImageRootCacheEnv)
	switch dir {
	case "off":
		return nil, nil
	case "":
		user, err := os.UserCacheDir()
		if err != nil {
			return nil, err
		}
		dir = filepath.Join(user, "trellis", "node-images")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &imageRoots{dir: dir, containerdBin: bins.containerd, ctrBin: bins.ctr}, nil
}

// rootKey names the root holding archives: a hash of their manifests (image config and layer digests, tags), in
// order, and of the containerd binary that unpacks them.
func (r *imageRoots) rootKey(archives []string) (string, error) {
	h := sha256.New()
	ctd, err := filepath.EvalSymlinks(r.containerdBin)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(ctd)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "containerd %s %d %d\n", ctd, fi.Size(), fi.ModTime().UnixNano())
	for _, a := range archives {
		m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(a) })
		if err != nil {
			return "", fmt.Errorf("image archive %s: %w", a, err)
		}
		b, err := json.Marshal(m)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\n", b)
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// clone makes dst, a containerd root that does not exist yet, a copy of the root holding archives, building that
// root first when the machine has none. It returns the root's directory and whether it built it.
func (r *imageRoots) clone(ctx context.Context, archives []string, dst string) (root string, built bool, err error) {
	if _, err := os.Lstat(dst); err == nil {
		return "", false, fmt.Errorf("%s exists", dst)
	}
	key, err := r.rootKey(archives)
	if err != nil {
		return "", false, err
	}
	root = filepath.Join(r.dir, key)
	lock, err := lockWait(ctx, root+".lock")
	if err != nil {
		return "", false, err
	}
	defer lock.Close()
	if _, err := os.Stat(filepath.Join(root, "done")); err != nil {
		if err := r.build(ctx, archives, root); err != nil {
			return "", false, fmt.Errorf("build image root %s: %w", root, err)
		}
		built = true
		r.removeUnused(key)
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(root, "done"), now, now)
	if err := copyRoot(ctx, filepath.Join(root, "root"), dst); err != nil {
		_ = os.RemoveAll(dst)
		return "", false, err
	}
	return root, built, nil
}

// build imports archives with a containerd of its own into root/root, and marks root done once containerd has
// stopped and flushed its databases.
func (r *imageRoots) build(ctx context.Context, archives []string, root string) error {
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	// containerd's own mode for a root it makes.
	if err := os.MkdirAll(filepath.Join(root, "root"), 0o711); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(root, "containerd.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	c, err := startBareContainerd(ctx, r.containerdBin, filepath.Join(root, "root"), logFile)
	if err != nil {
		return err
	}
	// On an import's failure; a later stop returns the first one's result.
	defer func() { _ = c.stop() }()
	if err := importArchives(ctx, r.ctrBin, c.sock, archives); err != nil {
		return err
	}
	if err := c.stop(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, "done"), nil, 0o644)
}

// bareContainerd is a containerd on a root of its choosing without CRI and NRI, and with nothing outside root and a
// temporary directory of its own (state, sockets, the opt service's directory): what builds an image root.
type bareContainerd struct {
	sock    string
	cmd     *exec.Cmd
	done    chan struct{} // closed when containerd has exited; waitErr is then its status
	waitErr error
	state   string
	once    sync.Once
	err     error
}

func startBareContainerd(ctx context.Context, bin, root string, log io.Writer) (*bareContainerd, error) {
	state, err := os.MkdirTemp("", "trellis-node-images-")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(state, "containerd.sock")
	config := fmt.Sprintf(`version = 3
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images",
  "io.containerd.nri.v1.nri"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, root, filepath.Join(state, "state"), sock, sock+".ttrpc", filepath.Join(state, "opt"))
	if err := os.WriteFile(filepath.Join(state, "config.toml"), []byte(config), 0o600); err != nil {
		_ = os.RemoveAll(state)
		return nil, err
	}
	cmd := exec.Command(bin, "--config", filepath.Join(state, "config.toml"))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(state)
		return nil, err
	}
	c := &bareContainerd{sock: sock, cmd: cmd, done: make(chan struct{}), state: state}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	if err := c.waitSocket(ctx); err != nil {
		_ = c.stop()
		return nil, err
	}
	return c, nil
}

// stop stops containerd (SIGTERM, SIGKILL after 30 s) and removes its temporary directory; an exit other than
// SIGTERM's clean one is an error. Later calls return the first call's result.
func (c *bareContainerd) stop() error {
	c.once.Do(func() {
		defer os.RemoveAll(c.state)
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
			if c.waitErr != nil {
				c.err = fmt.Errorf("containerd: %w", c.waitErr)
			}
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
			c.err = errors.New("containerd did not stop within 30 s of SIGTERM")
		}
	})
	return c.err
}

// waitSocket waits for containerd's socket, or for containerd to exit.
func (c *bareContainerd) waitSocket(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if _, err := os.Stat(c.sock); err == nil {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("containerd exited: %v", c.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("containerd's socket %s: %w", c.sock, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// removeUnused removes the roots other than keep that no node used for imageRootUnused (those of testbin images
// since rebuilt), skipping any whose lock another process holds.
func (r *imageRoots) removeUnused(keep string) {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == keep {
			continue
		}
		root := filepath.Join(r.dir, e.Name())
		if fi, err := os.Stat(filepath.Join(root, "done")); err == nil && time.Since(fi.ModTime()) < imageRootUnused {
			continue
		}
		f, ok, err := tryLockFile(root + ".lock")
		if err != nil || !ok {
			continue
		}
		_ = os.RemoveAll(root)
		_ = os.Remove(root + ".lock")
		f.Close()
	}
}

// lockWait takes an exclusive lock on path, waiting while another process holds it (one builds the root).
func lockWait(ctx context.Context, path string) (*os.File, error) {
	for {
		f, ok, err := tryLockFile(path)
		if err != nil || ok {
			return f, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// copyRoot copies the containerd root src to dst (which must not exist): directories with their modes, owners,
// times and extended attributes (overlayfs keeps opaque directories in them), files as hard links, but containerd's
// bolt databases, which are copied, and the introspection service's UUID, which the node's containerd makes anew.
// The images' own files (content blobs, snapshots' layers) are not looked at: whatever their names, they stay links.
func copyRoot(ctx context.Context, src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", "--link", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a --link %s %s: %v: %s", src, dst, err, strings.TrimSpace(string(out)))
	}
	return filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && (d.Name() == "blobs" || d.Name() == "snapshots"):
			return filepath.SkipDir
		case d.Type().IsRegular() && strings.HasSuffix(d.Name(), ".db"):
			return unlinkCopy(path)
		case d.Type().IsRegular() && d.Name() == "uuid" && filepath.Base(filepath.Dir(path)) == "io.containerd.grpc.v1.introspection":
			return os.Remove(path)
		}
		return nil
	})
}

// unlinkCopy replaces the hard link path by a copy of its content with the same mode.
func unlinkCopy(path string) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	tmp := path + ".copy"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		_ = os.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
