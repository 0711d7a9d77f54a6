package exttest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trellis-dev/trellis/deploy/crds"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1pb "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// Timeout bounds every wait of a test.
const Timeout = 30 * time.Second

var installed sync.Map // *seedtest.Seed → error of the CRD installation

// quietGlobalLog gives controller-runtime's global logger, which informers use, a sink: without one it complains
// with a stack trace. The managers of tests log to their own Log.
var quietGlobalLog = sync.OnceFunc(func() { logf.SetLogger(logr.Discard()) })

// Scheme returns a scheme with client-go's kinds and the extension kinds.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := extensionsv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// InstallCRDs installs the extension CRDs into the seed at cfg, once per seed.
func InstallCRDs(t testing.TB, seed *seedtest.Seed) {
	t.Helper()
	v, _ := installed.LoadOrStore(seed, sync.OnceValue(func() error {
		c, err := client.New(seed.Config, client.Options{})
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return crds.Install(ctx, c)
	}))
	if err := v.(func() error)(); err != nil {
		t.Fatalf("install CRDs: %v", err)
	}
}

// Env is one test's piece of the shared seed.
type Env struct {
	// Seed is the shared seed.
	Seed *seedtest.Seed
	// Namespace is the test's namespace.
	Namespace string
	// Client reads and writes the seed directly (uncached).
	Client client.Client
	// Manager is the test's manager, not yet started: the test adds its controllers, then calls Start.
	Manager manager.Manager
	// Log records the manager's log lines.
	Log *Log
}

// New returns an Env on the shared seed (the test package needs seedtest.Main in TestMain) with the CRDs installed
// and a manager whose cache covers the test's namespace (and cluster-scoped objects).
func New(t testing.TB) *Env {
	t.Helper()
	quietGlobalLog()
	seed := seedtest.StartShared(t)
	InstallCRDs(t, seed)
	ns := seed.Namespace(t)
	scheme := Scheme()
	c, err := client.New(seed.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	log := &Log{t: t}
	// Registered before the manager's cleanup, so it runs after it (cleanups run last-in first-out): lines logged
	// by goroutines that outlive the manager no longer reach the finished test.
	t.Cleanup(func() {
		log.mu.Lock()
		log.done = true
		log.mu.Unlock()
	})
	mgr, err := NewManager(seed.Config, scheme, log.Logger(), ns)
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Seed: seed, Namespace: ns, Client: c, Manager: mgr, Log: log}
}

// NewManager returns a manager for tests and examples: no metrics or probe listeners, no leader election, names of
// controllers not checked for uniqueness (several tests register the same kind and type), cache limited to
// namespaces (when given).
func NewManager(cfg *rest.Config, scheme *runtime.Scheme, log logr.Logger, namespaces ...string) (manager.Manager, error) {
	quietGlobalLog()
	skip := true
	opts := manager.Options{
		Scheme:                 scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &skip},
	}
	if len(namespaces) > 0 {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return manager.New(cfg, opts)
}

// Start runs the manager until the test ends and waits for its caches.
func (e *Env) Start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Manager.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(Timeout):
			t.Error("manager did not stop")
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, Timeout)
	defer syncCancel()
	if !e.Manager.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatal("manager cache did not sync")
	}
}

// Shoot returns a Shoot for the Cluster of namespace ns, as the agent writes it.
func Shoot(ns string) *corev1beta1.Shoot {
	return &corev1beta1.Shoot{
		ApiVersion: "core.gardener.cloud/v1beta1",
		Kind:       "Shoot",
		Metadata:   &metav1pb.ObjectMeta{Name: "shoot-of-" + ns, Namespace: "garden-test"},
		Spec:       &corev1beta1.ShootSpec{Region: "local", Provider: &corev1beta1.Provider{Type: "local"}},
	}
}

// WriteCluster creates or updates the Cluster named ns with shoot (encoded with kjson, as the agent does) and a
// small Seed and CloudProfile.
func (e *Env) WriteCluster(t testing.TB, shoot *corev1beta1.Shoot) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	raw, err := kjson.Marshal(shoot)
	if err != nil {
		t.Fatal(err)
	}
	cl := &extensionsv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace}}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(cl), cl); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	cl.Spec.Shoot.Raw = raw
	cl.Spec.Seed.Raw = []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Seed","metadata":{"name":"local"}}`)
	cl.Spec.CloudProfile.Raw = []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"CloudProfile","metadata":{"name":"local"}}`)
	if cl.ResourceVersion == "" {
		err = e.Client.Create(ctx, cl)
	} else {
		err = e.Client.Update(ctx, cl)
	}
	if err != nil {
		t.Fatalf("write Cluster %s: %v", e.Namespace, err)
	}
}

// Eventually polls cond until it returns nil, and fails the test with its last error after Timeout.
func Eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Log records log lines.
type Log struct {
	t     testing.TB
	mu    sync.Mutex
	lines []string
	done  bool // the test ended: no more t.Log
}

// Logger returns a logger that records to l (verbosity 1) and, with -v, logs to the test.
func (l *Log) Logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		line := prefix + " " + args
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, line)
		if testing.Verbose() && !l.done {
			l.t.Log(line)
		}
	}, funcr.Options{Verbosity: 1})
}

// Count returns how many recorded lines contain every one of parts.
func (l *Log) Count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		n++
	}
	return n
}

// WaitFor waits until a recorded line contains every one of parts.
func (l *Log) WaitFor(t testing.TB, parts ...string) {
	t.Helper()
	Eventually(t, fmt.Sprintf("log line with %q", parts), func() error {
		if l.Count(parts...) == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})
}
