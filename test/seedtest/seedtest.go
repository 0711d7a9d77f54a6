package seedtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/trellis-dev/trellis/test/localnode"
	"github.com/trellis-dev/trellis/test/timescale"
)

const (
	// StartTimeout bounds the start of etcd, of kube-apiserver and of kube-controller-manager, each; generous for
	// loaded 2-core machines.
	StartTimeout = 60 * time.Second
	// StopTimeout bounds the graceful stop of etcd and of kube-apiserver before each is killed; the controller manager
	// is killed at once.
	StopTimeout = 30 * time.Second

	// EnvAssets names a directory holding etcd, kube-apiserver and kube-controller-manager to use instead of
	// <module root>/bin/testbin.
	EnvAssets = "KUBEBUILDER_ASSETS"
	// envAttachOutput is envtest's switch to send the processes' output to stdout.
	envAttachOutput = "KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT"
)

// Seed is a running kube-apiserver with its etcd and a kube-controller-manager.
type Seed struct {
	// Config reaches the seed as the admin user (system:masters) with a client certificate.
	Config *rest.Config
	// Client is a clientset for Config.
	Client kubernetes.Interface
	// Kubeconfig holds the server, its CA and the admin's client certificate and key inline: usable by another process.
	Kubeconfig []byte
	// KubeconfigPath is a file holding Kubeconfig.
	KubeconfigPath string
	// Dir holds the seed's files: kubeconfig, logs, etcd data, certificates.
	Dir string
	// StartDuration is how long the start took, from launching etcd to the controller manager collecting garbage
	// (and, WithNode, to the node being Ready with its add-ons).
	StartDuration time.Duration
	// Node is the seed's node, WithNode; nil otherwise.
	Node *localnode.Node
	// AuditLog is the kube-apiserver's audit log, WithAuditLog (read it with ReadAuditLog); "" otherwise.
	AuditLog string

	env      *envtest.Environment
	kcm      *controllerManager
	kcmStart time.Duration   // the controller manager's part of StartDuration
	slot     *localnode.Slot // the node's slot, WithNode, until the node runs
	logs     []*os.File
	shared   bool
	stopOnce sync.Once
	stopErr  error
}

// Option changes how a seed starts.
type Option func(*options)

type options struct {
	crdPaths   []string
	node       bool
	nodeLog    *slog.Logger
	nodeImages []string
	nodeSlot   int
	audit      bool
}

// WithCRDs installs the CustomResourceDefinitions in paths (YAML or JSON files, or directories of them) when the
// seed starts, and waits for them to be served, before the controller manager starts. Its garbage collector then
// follows owner references to their objects from the start; it finds CRDs installed later only at its next discovery
// sync, every 30 s, and until then leaves the dependents of their objects alone (up to 45 s in all). The apiserver's
// first watch of a new CRD's objects, the collector's, costs the start about 1 s. A missing path fails the start.
func WithCRDs(paths ...string) Option {
	return func(o *options) { o.crdPaths = append(o.crdPaths, paths...) }
}

func newOptions(opts []Option) options {
	o := options{nodeSlot: -1}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Start starts a seed that is stopped when the test ends. The test fails if the binaries are missing (run `make
// testbin`) or the seed does not start, and, when it ends, if the controller manager exited meanwhile.
func Start(t testing.TB, opts ...Option) *Seed {
	t.Helper()
	s, err := start(context.Background(), t.TempDir(), newOptions(opts))
	if err != nil {
		t.Fatalf("seedtest: %v", err)
	}
	t.Logf("seedtest: seed %s started in %v (kube-controller-manager %v)", s.Config.Host,
		s.StartDuration.Round(time.Millisecond), s.kcmStart.Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(s.logTails())
		}
		if err := s.stop(); err != nil {
			t.Errorf("seedtest: stop seed: %v", err)
		}
	})
	return s
}

// Stop stops the seed; later calls do nothing. Seeds from Start are also stopped when their test ends. On a shared
// seed Stop does nothing: Main stops it after the tests.
func (s *Seed) Stop() {
	if s.shared {
		return
	}
	_ = s.stop()
}

func (s *Seed) stop() error {
	s.stopOnce.Do(func() {
		// The controller manager first, so that it does not log the apiserver's going away.
		var errs []error
		if s.Node != nil {
			errs = append(errs, s.Node.Stop())
		} else if s.slot != nil {
			s.slot.Release()
		}
		if s.kcm != nil {
			errs = append(errs, s.kcm.stop())
		}
		if s.env != nil {
			errs = append(errs, s.env.Stop())
		}
		s.stopErr = errors.Join(errs...)
		for _, f := range s.logs {
			_ = f.Close()
		}
	})
	return s.stopErr
}

// Namespace creates a namespace with a generated name for the test and returns its name. It is not deleted when the
// test ends; it goes with the seed.
func (s *Seed) Namespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := s.Client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("seedtest: create namespace: %v", err)
	}
	return ns.Name
}

var shared struct {
	mu      sync.Mutex
	inMain  bool
	opts    options
	started bool
	seed    *Seed
	err     error
}

// Main runs the tests of a package whose tests share one seed through StartShared, then stops that seed and exits
// with the tests' status; opts apply to the shared seed. Call it from TestMain:
//
//	func TestMain(m *testing.M) { seedtest.Main(m) }
func Main(m *testing.M, opts ...Option) {
	shared.mu.Lock()
	shared.inMain = true
	shared.opts = newOptions(opts)
	shared.mu.Unlock()

	code := m.Run()

	shared.mu.Lock()
	defer shared.mu.Unlock()
	if s := shared.seed; s != nil {
		if err := s.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "seedtest: stop shared seed: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
		if code == 0 {
			_ = os.RemoveAll(s.Dir)
		} else {
			_ = os.RemoveAll(filepath.Join(s.Dir, "etcd"))
			fmt.Fprintf(os.Stderr, "seedtest: the shared seed's logs are kept in %s\n", s.Dir)
		}
	}
	os.Exit(code)
}

// StartShared returns the seed shared by the tests of the package, starting it on first use; it needs Main in
// TestMain, which stops it after the tests. Tests keep apart by namespace (see Namespace). A failed start fails every
// test that asks for the seed.
func StartShared(t testing.TB) *Seed {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.inMain {
		t.Fatal("seedtest: StartShared needs `func TestMain(m *testing.M) { seedtest.Main(m) }` in the test package")
	}
	if !shared.started {
		shared.started = true
		dir, err := os.MkdirTemp("", "seedtest-")
		if err == nil {
			shared.seed, err = start(context.Background(), dir, shared.opts)
			if err != nil {
				_ = os.RemoveAll(dir)
			}
		}
		if err != nil {
			shared.err = err
		} else {
			shared.seed.shared = true
			t.Logf("seedtest: shared seed %s started in %v (kube-controller-manager %v)", shared.seed.Config.Host,
				shared.seed.StartDuration.Round(time.Millisecond), shared.seed.kcmStart.Round(time.Millisecond))
		}
	}
	if shared.err != nil {
		t.Fatalf("seedtest: shared seed: %v", shared.err)
	}
	return shared.seed
}

// start starts a seed whose files go to dir; ctx bounds the node's start (WithNode). On error nothing is left
// running.
func start(ctx context.Context, dir string, o options) (_ *Seed, err error) {
	bins, err := binaries()
	if err != nil {
		return nil, err
	}
	s := &Seed{Dir: dir}
	defer func() {
		if err != nil {
			if tails := s.logTails(); tails != "" {
				err = fmt.Errorf("%w\n%s", err, tails)
			}
			_ = s.stop()
		}
	}()

	etcd := &envtest.Etcd{DataDir: filepath.Join(dir, "etcd")}
	// etcd's own ticks (heartbeat 100 ms, election 1 s). Ticks of 10 and 100 ms made the single member elect itself
	// about 0.4 s sooner, and then cost it 1.0–1.3 CPU-seconds a minute idle instead of 0.4–0.6: a seed lives for
	// minutes beside many others in make test, whose machine is busy from start to end (docs/testing.md).
	if etcd.Path, err = processPath(dir, bins.etcd); err != nil {
		return nil, err
	}
	falseValue := false
	s.env = &envtest.Environment{
		UseExistingCluster:       &falseValue,
		ControlPlane:             envtest.ControlPlane{Etcd: etcd},
		ControlPlaneStartTimeout: timescale.Scale(StartTimeout),
		ControlPlaneStopTimeout:  timescale.Scale(StopTimeout),
		CRDDirectoryPaths:        o.crdPaths,
		ErrorIfCRDPathMissing:    true,
	}
	api := s.env.ControlPlane.GetAPIServer()
	api.CertDir = filepath.Join(dir, "pki")
	if api.Path, err = processPath(dir, bins.apiserver); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(api.CertDir, 0o700); err != nil {
		return nil, err
	}
	if o.node {
		if s.slot, err = configureForNode(api, api.CertDir, o); err != nil {
			return nil, err
		}
	}
	if o.audit {
		if s.AuditLog, err = configureAudit(api, dir); err != nil {
			return nil, err
		}
	}
	if os.Getenv(envAttachOutput) != "true" {
		if etcd.Out, err = s.logFile("etcd.log"); err != nil {
			return nil, err
		}
		etcd.Err = etcd.Out
		if api.Out, err = s.logFile("kube-apiserver.log"); err != nil {
			return nil, err
		}
		api.Err = api.Out
	}

	begin := time.Now()
	cfg, err := s.env.Start()
	if err != nil {
		return nil, fmt.Errorf("start seed (etcd %s, kube-apiserver %s): %w", bins.etcd, bins.apiserver, err)
	}
	s.Config = cfg
	// envtest writes webhook serving certificates into os.TempDir on every start and removes them only in Stop, which
	// a seed process ended by SIGKILL (a landscape's localseed past its stop timeout) never reaches. A seed serves no
	// webhooks: they go at once.
	if d := s.env.WebhookInstallOptions.LocalServingCertDir; d != "" {
		_ = os.RemoveAll(d)
	}
	if s.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	s.Kubeconfig = s.env.KubeConfig
	s.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(s.KubeconfigPath, s.Kubeconfig, 0o600); err != nil {
		return nil, err
	}

	kcmBegin := time.Now()
	kcmPath, err := processPath(dir, bins.controllerManager)
	if err != nil {
		return nil, err
	}
	out, err := s.controllerManagerOutput()
	if err != nil {
		return nil, err
	}
	run, kcmArgs := controllers, []string(nil)
	if o.node {
		run = append(slices.Clone(controllers), nodeControllers...)
		kcmArgs = []string{"--root-ca-file=" + filepath.Join(api.CertDir, "ca.crt")}
	}
	if s.kcm, err = startControllerManager(kcmPath, s.KubeconfigPath, out, run, kcmArgs...); err != nil {
		return nil, fmt.Errorf("start kube-controller-manager %s: %w", bins.controllerManager, err)
	}
	kcmCtx, cancel := context.WithTimeout(ctx, timescale.Scale(StartTimeout))
	defer cancel()
	if err := s.waitCollecting(kcmCtx); err != nil {
		return nil, fmt.Errorf("start kube-controller-manager %s: %w", bins.controllerManager, err)
	}
	s.kcmStart = time.Since(kcmBegin)
	if o.node {
		if err := s.startNode(ctx, s.slot, bins.dir, o); err != nil {
			return nil, err
		}
	}
	s.StartDuration = time.Since(begin)
	return s, nil
}

// binaryPaths are the paths of the seed's binaries.
type binaryPaths struct {
	dir, etcd, apiserver, controllerManager string
}

// TestbinDir is where seeds take their binaries from: $KUBEBUILDER_ASSETS when it is set, else bin/testbin of the
// module root, the first directory holding go.mod at or above the working directory.
func TestbinDir() (string, error) {
	if dir := os.Getenv(EnvAssets); dir != "" {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for root := wd; ; {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			return filepath.Join(root, "bin", "testbin"), nil
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", fmt.Errorf("no go.mod at or above %s to find bin/testbin: run `make testbin` and set $%s", wd, EnvAssets)
		}
		root = parent
	}
}

// binaries returns the paths of the seed's binaries in TestbinDir.
func binaries() (binaryPaths, error) {
	dir, err := TestbinDir()
	if err != nil {
		return binaryPaths{}, err
	}
	var missing []string
	find := func(name string) string {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, p)
		}
		return p
	}
	bins := binaryPaths{
		dir:               dir,
		etcd:              find("etcd"),
		apiserver:         find("kube-apiserver"),
		controllerManager: find("kube-controller-manager"),
	}
	if len(missing) > 0 {
		return binaryPaths{}, fmt.Errorf("no executable %s: run `make testbin`", strings.Join(missing, " or "))
	}
	return bins, nil
}

func (s *Seed) logFile(name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(s.Dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	s.logs = append(s.logs, f)
	return f, nil
}

// logTails returns the end of each process's output.
func (s *Seed) logTails() string {
	const maxTail = 4 << 10
	var b strings.Builder
	for _, f := range s.logs {
		r, err := os.Open(f.Name())
		if err != nil {
			continue
		}
		fi, err := r.Stat()
		if err == nil && fi.Size() > maxTail {
			_, err = r.Seek(-maxTail, io.SeekEnd)
		}
		var tail []byte
		if err == nil {
			tail, err = io.ReadAll(r)
		}
		_ = r.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			continue
		}
		fmt.Fprintf(&b, "--- end of %s ---\n%s\n", f.Name(), tail)
	}
	return b.String()
}

// StartInDir starts a seed outside a test, with its files in dir, for tools such as the local landscape
// (test/localseed). The caller stops it with Close.
func StartInDir(dir string, opts ...Option) (*Seed, error) {
	return StartInDirContext(context.Background(), dir, opts...)
}

// StartInDirContext is StartInDir whose node's start (WithNode) ends when ctx does: a signal during the start stops
// it within moments instead of after the node's start timeouts.
func StartInDirContext(ctx context.Context, dir string, opts ...Option) (*Seed, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return start(ctx, dir, newOptions(opts))
}

// Close stops a seed started with StartInDir. It returns an error if the controller manager exited while the seed
// ran.
func (s *Seed) Close() error { return s.stop() }
