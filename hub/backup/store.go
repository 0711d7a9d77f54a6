package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ObjectStore keeps snapshots by name. Put must not leave a partial object under name when it fails.
type ObjectStore interface {
	Put(ctx context.Context, name string, r io.Reader) error
	// List returns the stored snapshots, oldest first.
	List(ctx context.Context) ([]Object, error)
	Delete(ctx context.Context, name string) error
}

// Object is a stored snapshot.
type Object struct {
	Name     string
	Size     int64
	Modified time.Time
}

// Dir is an ObjectStore in a local directory (created on first Put). Objects are written to a temporary file,
// synced and renamed, so a crash leaves no partial snapshot under its name.
type Dir string

const snapshotSuffix = ".db"

// Put writes r to <dir>/<name>.
func (d Dir) Put(ctx context.Context, name string, r io.Reader) error {
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return fmt.Errorf("backup dir: %w", err)
	}
	tmp, err := os.CreateTemp(string(d), ".partial-*")
	if err != nil {
		return fmt.Errorf("backup dir: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := io.Copy(tmp, contextReader{ctx, r}); err != nil {
		tmp.Close()
		return fmt.Errorf("write snapshot %s: %w", name, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(string(d), name))
}

// List returns the directory's snapshots (*.db), oldest first.
func (d Dir) List(context.Context) ([]Object, error) {
	entries, err := os.ReadDir(string(d))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Object
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), snapshotSuffix) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, Object{Name: e.Name(), Size: fi.Size(), Modified: fi.ModTime()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete removes a snapshot.
func (d Dir) Delete(_ context.Context, name string) error {
	if err := os.Remove(filepath.Join(string(d), name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// contextReader stops a copy when ctx ends.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
