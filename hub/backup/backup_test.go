package backup

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestRetention: snapshots beyond Keep and older than MaxAge are deleted, the newest never.
func TestRetention(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		keep   int
		maxAge time.Duration
		want   []string
	}{
		{"keep 2", 2, 0, []string{"garden-4.db", "garden-5.db"}},
		{"max age 150m", 0, 150 * time.Minute, []string{"garden-4.db", "garden-5.db"}},
		{"max age below the newest", 0, time.Minute, []string{"garden-5.db"}},
		{"no limits", 0, 0, []string{"garden-1.db", "garden-2.db", "garden-3.db", "garden-4.db", "garden-5.db"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for i := 1; i <= 5; i++ { // garden-5 is an hour old, garden-1 five hours
				p := filepath.Join(dir, "garden-"+string(rune('0'+i))+".db")
				if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
				mt := now.Add(-time.Duration(6-i) * time.Hour)
				if err := os.Chtimes(p, mt, mt); err != nil {
					t.Fatal(err)
				}
			}
			_ = os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600) // not a snapshot: left alone
			b := &Backups{cfg: Config{Store: Dir(dir), Keep: tc.keep, MaxAge: tc.maxAge, Now: func() time.Time { return now }}}
			b.kept = newTestGauge()
			if err := b.retain(context.Background()); err != nil {
				t.Fatal(err)
			}
			objs, _ := Dir(dir).List(context.Background())
			var got []string
			for _, o := range objs {
				got = append(got, o.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
				t.Error("a file that is no snapshot was deleted")
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	_, err := New(Config{Interval: -time.Second, Keep: -1})
	for _, want := range []string{"etcd client required", "object store required", "backup-interval", "backup-keep"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %q", err, want)
		}
	}
}

func TestRestoreRefuses(t *testing.T) {
	dir := t.TempDir()
	if err := Restore(RestoreConfig{Snapshot: filepath.Join(dir, "missing.db"), EtcdDir: filepath.Join(dir, "etcd")}); err == nil || !strings.Contains(err.Error(), "snapshot") {
		t.Errorf("missing snapshot: %v", err)
	}
	if err := Restore(RestoreConfig{EtcdDir: dir}); err == nil || !strings.Contains(err.Error(), "snapshot: required") {
		t.Errorf("no snapshot: %v", err)
	}
}

func newTestGauge() prometheus.Gauge { return prometheus.NewGauge(prometheus.GaugeOpts{Name: "test"}) }
