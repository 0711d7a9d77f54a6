package store_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/test/etcdcluster"
	"github.com/trellis-dev/trellis/test/timescale"
)

// TestReplicaCachesFollowOtherWriters: two Stores on one external etcd, as two hub replicas. Everything is written
// through the first while the second's readers ask for progress all the time (Collection.Sync); afterwards the
// second's watch cache holds every object at the version etcd holds. Several resources are cached, so their watches
// share one watch stream and its progress notifications.
func TestReplicaCachesFollowOtherWriters(t *testing.T) {
	t.Run("OneMember", func(t *testing.T) {
		testReplicaCaches(t, storetest.OpenExternal(storetest.StartEtcd(t)))
	})
	t.Run("ThreeMembers", func(t *testing.T) {
		bin := storetest.EtcdBinary()
		if bin == "" {
			t.Skip("no etcd binary (make testbin)")
		}
		c, err := etcdcluster.Start(t.Context(), etcdcluster.Config{Bin: bin, Dir: t.TempDir(), Members: 3, NoFsync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		tc := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		testReplicaCaches(t, func(t *testing.T, cfg store.Config) *store.Store {
			cfg.Endpoints, cfg.TLS = c.Endpoints(), tc
			s, err := store.Open(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
}

// testReplicaCaches runs the check on the etcd that open connects to.
func testReplicaCaches(t *testing.T, open storetest.Open) {
	ctx := t.Context()
	cfg := store.Config{Prefix: "/replicas", EncryptionKeys: []store.Key{storetest.TestKey("test")}, Logger: storetest.Logger(t)}
	var shoots, secrets [2]*store.Collection
	var stores [2]*store.Store
	for i := range 2 {
		s := open(t, cfg)
		stores[i] = s
		t.Cleanup(func() { _ = s.Close() })
		var err error
		if shoots[i], err = s.Register(ctx, storetest.Shoots()); err != nil {
			t.Fatal(err)
		}
		if secrets[i], err = s.Register(ctx, storetest.Secrets()); err != nil {
			t.Fatal(err)
		}
		if _, err = s.Register(ctx, storetest.Namespaces()); err != nil {
			t.Fatal(err)
		}
	}

	const objects, rounds = 40, 25
	var (
		mu   sync.Mutex
		want = map[string]string{} // shoot name → resourceVersion written last
	)
	writeCtx, stop := context.WithCancel(ctx)
	var readers sync.WaitGroup
	// The second replica's readers: each Sync asks etcd for progress on the replica's shared watch stream.
	for _, c := range []*store.Collection{shoots[1], secrets[1]} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for writeCtx.Err() == nil {
				_ = c.Sync(writeCtx)
			}
		}()
	}
	var writers sync.WaitGroup
	errs := make(chan error, objects)
	for i := range objects {
		writers.Add(1)
		go func() {
			defer writers.Done()
			name := fmt.Sprintf("s%02d", i)
			obj, err := shoots[0].Create(ctx, storetest.NewShoot("garden-dev", name, "seed", nil))
			if err != nil {
				errs <- err
				return
			}
			for r := range rounds {
				next := obj.(*corev1beta1.Shoot)
				next.Metadata.Labels = map[string]string{"round": fmt.Sprint(r)}
				if obj, err = shoots[0].Update(ctx, next); err != nil {
					errs <- err
					return
				}
				// Writes to another resource move etcd's revision without events on the shoots' watch.
				if _, err := secrets[0].Create(ctx, storetest.NewSecret("garden-dev", fmt.Sprintf("%s-%d", name, r), nil)); err != nil {
					errs <- err
					return
				}
			}
			mu.Lock()
			want[name] = obj.GetMetadata().GetResourceVersion()
			mu.Unlock()
		}()
	}
	writers.Wait()
	stop()
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	if err := shoots[1].Sync(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(timescale.Scale(5 * time.Second))
	for {
		var stale []string
		for name, rv := range want {
			got, err := shoots[1].Get(ctx, "garden-dev", name)
			if err != nil {
				t.Fatal(err)
			}
			if got.GetMetadata().GetResourceVersion() != rv {
				stale = append(stale, fmt.Sprintf("%s at %s, etcd %s", name, got.GetMetadata().GetResourceVersion(), rv))
			}
		}
		if len(stale) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second replica's cache, synced with etcd at revision %d, holds %d of %d shoots at older versions: %v",
				stores[1].Revision(), len(stale), len(want), stale)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
