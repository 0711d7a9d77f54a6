package storetest

import (
	"crypto/sha256"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Shoots is a namespaced resource with spec and status, a "spec.seedName" field and a "seed" index.
func Shoots() store.Resource {
	return store.Resource{
		Group: "core.gardener.cloud", Resource: "shoots", Namespaced: true,
		New: func() store.Object { return &corev1beta1.Shoot{} },
		Fields: map[string]func(store.Object) string{
			"spec.seedName": func(o store.Object) string { return o.(*corev1beta1.Shoot).GetSpec().GetSeedName() },
		},
		Indexes: map[string]func(store.Object) []string{
			"seed": func(o store.Object) []string {
				if s := o.(*corev1beta1.Shoot).GetSpec().GetSeedName(); s != "" {
					return []string{s}
				}
				return nil
			},
		},
	}
}

// Namespaces is a cluster-scoped resource with spec and status.
func Namespaces() store.Resource {
	return store.Resource{
		Group: "", Resource: "namespaces",
		New: func() store.Object { return &kcorev1.Namespace{} },
	}
}

// Secrets is a namespaced resource encrypted at rest, without status.
func Secrets() store.Resource {
	return store.Resource{
		Group: "", Resource: "secrets", Namespaced: true, Encrypted: true,
		New: func() store.Object { return &kcorev1.Secret{} },
		Fields: map[string]func(store.Object) string{
			"type": func(o store.Object) string { return o.(*kcorev1.Secret).GetType() },
		},
	}
}

// NewShoot returns a shoot with the given labels and seed.
func NewShoot(namespace, name, seed string, labels map[string]string) *corev1beta1.Shoot {
	s := &corev1beta1.Shoot{
		ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot",
		Metadata: &metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec:     &corev1beta1.ShootSpec{Region: "eu-west-1", Provider: &corev1beta1.Provider{Type: "local"}},
	}
	if seed != "" {
		s.Spec.SeedName = &seed
	}
	return s
}

// NewSecret returns an Opaque secret holding data.
func NewSecret(namespace, name string, data map[string][]byte) *kcorev1.Secret {
	return &kcorev1.Secret{
		ApiVersion: "v1", Kind: "Secret",
		Metadata: &metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:     "Opaque",
		Data:     data,
	}
}

// TestKey returns a deterministic 32-byte encryption key named name.
func TestKey(name string) store.Key {
	sum := sha256.Sum256([]byte("trellis test key " + name))
	return store.Key{Name: name, Secret: sum[:]}
}

// Logger returns a logger writing warnings and errors to the test log until the test ends.
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.close) // registered first, so it runs after the cleanups that close stores
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

var _ io.Writer = (*testWriter)(nil)

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Logf("%s", p)
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
