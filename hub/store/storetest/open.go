package storetest

import (
	"testing"

	"github.com/trellis-dev/trellis/hub/store"
)

// OpenEmbedded is an Open for the embedded etcd: it opens cfg as it is.
func OpenEmbedded(t *testing.T, cfg store.Config) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("open embedded store: %v", err)
	}
	// Closed at the test's end at the latest (Close is idempotent): a member left running after its data dir is
	// removed stops the test binary at its next file purge (etcd logs that as fatal).
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// OpenExternal returns an Open for the external etcd at endpoint (see StartEtcd); tests keep apart by Prefix.
func OpenExternal(endpoint string) Open {
	return func(t *testing.T, cfg store.Config) *store.Store {
		t.Helper()
		cfg.Endpoints = []string{endpoint}
		cfg.DataDir = ""
		s, err := store.Open(t.Context(), cfg)
		if err != nil {
			t.Fatalf("open store on external etcd: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

// NewStore opens a Store on an embedded etcd in a temporary directory, with an encryption key and the test's
// logger, and closes it when the test ends. It is what tests of other packages need to run against real etcd.
func NewStore(t testing.TB) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), store.Config{
		DataDir:        t.TempDir(),
		EncryptionKeys: []store.Key{TestKey("test")},
		Logger:         Logger(t),
	})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
