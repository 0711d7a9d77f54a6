package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/trellis-dev/trellis/hub/backup"
)

// serverOptions are the server command's flags.
type serverOptions struct {
	store, listen             string
	endpoints                 []string
	caFile, certFile, keyFile string
	interval                  time.Duration
	keep                      int
	now                       func() time.Time
	ready                     chan<- string // tests: receives the listener's address
	snapshotTimeout           time.Duration
}

func parseServer(args []string, stderr io.Writer) (*serverOptions, error) {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &serverOptions{now: time.Now}
	var endpoints string
	fs.StringVar(&o.store, "store", "", "directory of the snapshots: the shoot's backup entry (required)")
	fs.StringVar(&endpoints, "endpoints", "https://127.0.0.1:2379", "etcd's client URLs, comma-separated")
	fs.StringVar(&o.caFile, "cacert", "", "CA bundle that verifies etcd's serving certificate (https endpoints)")
	fs.StringVar(&o.certFile, "cert", "", "client certificate for etcd")
	fs.StringVar(&o.keyFile, "key", "", "client key for etcd")
	fs.DurationVar(&o.interval, "interval", time.Hour, "time between full snapshots")
	fs.IntVar(&o.keep, "keep", 7, "full snapshots to keep (the newest is always kept)")
	fs.StringVar(&o.listen, "listen", ":8080", "address of the HTTP API (/snapshot/full, /snapshot/latest, /healthz)")
	fs.DurationVar(&o.snapshotTimeout, "snapshot-timeout", 5*time.Minute, "bound of one snapshot")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	var errs []error
	if o.store == "" {
		errs = append(errs, errors.New("--store: required"))
	}
	for _, e := range strings.Split(endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			o.endpoints = append(o.endpoints, e)
		}
	}
	if len(o.endpoints) == 0 {
		errs = append(errs, errors.New("--endpoints: required"))
	}
	if o.interval <= 0 {
		errs = append(errs, fmt.Errorf("--interval: %v is not positive", o.interval))
	}
	if o.keep < 1 {
		errs = append(errs, fmt.Errorf("--keep: %d, want at least 1", o.keep))
	}
	if (o.certFile == "") != (o.keyFile == "") {
		errs = append(errs, errors.New("--cert and --key: give both or neither"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, usageError{err}
	}
	return o, nil
}

// nextSnapshot is how long to wait before the next scheduled full snapshot, given the newest one in the store: none
// or one older than interval is due now; otherwise the next is due interval after the newest (a restarted sidecar
// keeps the schedule instead of adding a snapshot per restart).
func nextSnapshot(newest time.Time, has bool, now time.Time, interval time.Duration) time.Duration {
	if !has {
		return 0
	}
	return max(newest.Add(interval).Sub(now), 0)
}

// sidecar takes the snapshots, one at a time.
type sidecar struct {
	o       *serverOptions
	log     *slog.Logger
	backups *backup.Backups
	store   backup.Dir
	mu      sync.Mutex // one snapshot at a time
	healthy chan struct{}
	once    sync.Once
}

func (o *serverOptions) run(ctx context.Context, log *slog.Logger) error {
	cfg := clientv3.Config{Endpoints: o.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if o.caFile != "" || o.certFile != "" {
		tlsInfo := transport.TLSInfo{TrustedCAFile: o.caFile, CertFile: o.certFile, KeyFile: o.keyFile}
		tc, err := tlsInfo.ClientConfig()
		if err != nil {
			return fmt.Errorf("etcd TLS: %w", err)
		}
		tc.MinVersion = tls.VersionTLS12
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	store := backup.Dir(o.store)
	b, err := backup.New(backup.Config{Etcd: cli, Store: store, Interval: o.interval, Keep: o.keep, Log: log, Now: o.now, Prefix: snapshotPrefix})
	if err != nil {
		return err
	}
	s := &sidecar{o: o, log: log, backups: b, store: store, healthy: make(chan struct{})}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) }) // ends with Shutdown below
	if o.ready != nil {
		o.ready <- ln.Addr().String()
	}
	log.Info("serving", "address", ln.Addr().String(), "store", o.store, "interval", o.interval)
	s.schedule(ctx)
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	wg.Wait()
	return nil
}

// schedule takes the scheduled snapshots until ctx ends; a failed one is retried after a short pause.
func (s *sidecar) schedule(ctx context.Context) {
	for {
		wait := s.o.interval
		objs, err := s.store.List(ctx)
		if err != nil {
			s.log.Error("list snapshots", "err", err)
		} else {
			var newest time.Time
			if len(objs) > 0 {
				newest = objs[len(objs)-1].Modified
			}
			wait = nextSnapshot(newest, len(objs) > 0, s.o.now(), s.o.interval)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if _, err := s.snapshot(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("scheduled snapshot failed", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
		}
	}
}

// snapshot takes one full snapshot, after any running one.
func (s *sidecar) snapshot(ctx context.Context) (backup.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.o.snapshotTimeout)
	defer cancel()
	obj, err := s.backups.Snapshot(ctx)
	if err == nil || obj.Name != "" {
		s.once.Do(func() { close(s.healthy) })
	}
	return obj, err
}

// snapshotResult is the JSON of /snapshot/full and /snapshot/latest.
type snapshotResult struct {
	Name      string    `json:"name"`
	SizeBytes int64     `json:"sizeBytes"`
	Modified  time.Time `json:"modified"`
	Seconds   float64   `json:"seconds,omitempty"`
}

func (s *sidecar) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /snapshot/full", func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		obj, err := s.snapshot(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, snapshotResult{Name: obj.Name, SizeBytes: obj.Size, Modified: obj.Modified, Seconds: time.Since(start).Seconds()})
	})
	mux.HandleFunc("GET /snapshot/latest", func(w http.ResponseWriter, r *http.Request) {
		objs, err := s.store.List(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if len(objs) == 0 {
			http.Error(w, "no snapshot yet", http.StatusNotFound)
			return
		}
		o := objs[len(objs)-1]
		writeJSON(w, snapshotResult{Name: o.Name, SizeBytes: o.Size, Modified: o.Modified})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-s.healthy:
			_, _ = io.WriteString(w, "ok")
		default:
			http.Error(w, "no snapshot taken yet", http.StatusServiceUnavailable)
		}
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
