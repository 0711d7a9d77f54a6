package store_test

import (
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
)

func openEmbedded(t *testing.T, cfg store.Config) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("open embedded store: %v", err)
	}
	return s
}

func TestConformanceEmbedded(t *testing.T) {
	storetest.RunConformance(t, openEmbedded)
}

func TestConformanceExternal(t *testing.T) {
	endpoint := storetest.StartEtcd(t)
	storetest.RunConformance(t, func(t *testing.T, cfg store.Config) *store.Store {
		t.Helper()
		cfg.Endpoints = []string{endpoint}
		cfg.DataDir = ""
		s, err := store.Open(t.Context(), cfg)
		if err != nil {
			t.Fatalf("open store on external etcd: %v", err)
		}
		return s
	})
}

// TestOpenEmbeddedFast holds the embedded etcd to its start-up budget (the hub must be ready in under 2 s).
func TestOpenEmbeddedFast(t *testing.T) {
	dir := t.TempDir()
	for _, run := range []string{"fresh", "restart"} {
		start := time.Now()
		s := openEmbedded(t, store.Config{DataDir: dir, Logger: storetest.Logger(t)})
		took := time.Since(start)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s open took %s", run, took)
		if took > 1500*time.Millisecond {
			t.Errorf("%s open took %s: want well under 1s", run, took)
		}
	}
}
