package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config configures the scheduled snapshots.
type Config struct {
	// Etcd is the hub's etcd client; the snapshot is of the member it is connected to.
	Etcd *clientv3.Client
	// Store keeps the snapshots (required).
	Store ObjectStore
	// Interval is the time between snapshots (required, positive).
	Interval time.Duration
	// Keep is how many snapshots are kept (0: no limit by count).
	Keep int
	// MaxAge removes snapshots older than this (0: no limit by age). The newest snapshot is kept regardless.
	MaxAge time.Duration
	// Registerer receives the metrics (nil: none).
	Registerer prometheus.Registerer
	Log        *slog.Logger
	// Now is the clock of snapshot names and of MaxAge (default time.Now).
	Now func() time.Time
	// Prefix starts the snapshots' names, <prefix>-<UTC time>.db (default "garden"; a shoot's etcd backups use
	// "full", as cmd/etcd-backup-restore does).
	Prefix string
}

// Backups takes snapshots on schedule and applies retention.
type Backups struct {
	cfg     Config
	taken   *prometheus.CounterVec
	last    prometheus.Gauge
	size    prometheus.Gauge
	kept    prometheus.Gauge
	seconds prometheus.Histogram
}

// New returns the backups of cfg.
func New(cfg Config) (*Backups, error) {
	var errs []error
	if cfg.Etcd == nil {
		errs = append(errs, errors.New("backup: etcd client required"))
	}
	if cfg.Store == nil {
		errs = append(errs, errors.New("backup: object store required"))
	}
	if cfg.Interval <= 0 {
		errs = append(errs, errors.New("backup-interval: must be positive"))
	}
	if cfg.Keep < 0 {
		errs = append(errs, errors.New("backup-keep: must not be negative"))
	}
	if cfg.MaxAge < 0 {
		errs = append(errs, errors.New("backup-max-age: must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "garden"
	}
	b := &Backups{
		cfg:     cfg,
		taken:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_backup_snapshots_total", Help: "etcd snapshots taken, by result (success, failure)."}, []string{"result"}),
		last:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "trellis_backup_last_success_timestamp_seconds", Help: "Unix time of the last successful snapshot."}),
		size:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "trellis_backup_last_size_bytes", Help: "Size of the last successful snapshot."}),
		kept:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "trellis_backup_snapshots_kept", Help: "Snapshots in the object store after retention."}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "trellis_backup_duration_seconds", Help: "Time to take and store a snapshot.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 16)}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{b.taken, b.last, b.size, b.kept, b.seconds} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("backup metrics: %w", err)
			}
		}
	}
	return b, nil
}

// Run takes a snapshot every Interval until ctx ends (the first one Interval after it starts: a replica that just
// became leader does not add a snapshot to the one its predecessor took). Failures are logged and counted; the next
// interval tries again.
func (b *Backups) Run(ctx context.Context) error {
	t := time.NewTicker(b.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := b.Snapshot(ctx); err != nil && ctx.Err() == nil {
			b.cfg.Log.Error("backup failed", "err", err)
		}
	}
}

// Snapshot takes one snapshot, stores it and applies retention; it returns the stored object.
func (b *Backups) Snapshot(ctx context.Context) (Object, error) {
	start := time.Now()
	obj, err := b.snapshot(ctx)
	if err != nil {
		b.taken.WithLabelValues("failure").Inc()
		return Object{}, err
	}
	b.taken.WithLabelValues("success").Inc()
	b.seconds.Observe(time.Since(start).Seconds())
	b.last.Set(float64(b.cfg.Now().Unix()))
	b.size.Set(float64(obj.Size))
	b.cfg.Log.Info("backup taken", "name", obj.Name, "bytes", obj.Size, "duration", time.Since(start).Round(time.Millisecond))
	if err := b.retain(ctx); err != nil {
		return obj, fmt.Errorf("retention: %w", err)
	}
	return obj, nil
}

func (b *Backups) snapshot(ctx context.Context) (Object, error) {
	// The snapshot is etcd's whole database with its revisions and a SHA-256 trailer the restore checks.
	rc, err := b.cfg.Etcd.Snapshot(ctx)
	if err != nil {
		return Object{}, fmt.Errorf("etcd snapshot: %w", err)
	}
	defer rc.Close()
	name := b.cfg.Prefix + "-" + b.cfg.Now().UTC().Format("20060102T150405.000Z") + snapshotSuffix
	cr := &countingReader{r: rc}
	if err := b.cfg.Store.Put(ctx, name, cr); err != nil {
		return Object{}, err
	}
	return Object{Name: name, Size: cr.n, Modified: b.cfg.Now()}, nil
}

// retain deletes the snapshots beyond Keep and older than MaxAge, never the newest. It runs after a new snapshot is
// stored, never before (a failed snapshot must not cost an old one): until it has run there are Keep+1.
func (b *Backups) retain(ctx context.Context) error {
	objs, err := b.cfg.Store.List(ctx)
	if err != nil {
		return err
	}
	var errs []error
	kept := 0
	for i, o := range objs {
		newer := len(objs) - 1 - i // snapshots newer than o
		tooMany := b.cfg.Keep > 0 && newer >= b.cfg.Keep
		tooOld := b.cfg.MaxAge > 0 && newer > 0 && b.cfg.Now().Sub(o.Modified) > b.cfg.MaxAge
		if !tooMany && !tooOld {
			kept++
			continue
		}
		if err := b.cfg.Store.Delete(ctx, o.Name); err != nil {
			errs = append(errs, err)
			kept++
		}
	}
	b.kept.Set(float64(kept))
	return errors.Join(errs...)
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
