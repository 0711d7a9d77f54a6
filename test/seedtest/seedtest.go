package seedtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// StartTimeout bounds the start of etcd and then of kube-apiserver, each; generous for loaded 2-core machines.
	StartTimeout = 60 * time.Second
	// StopTimeout bounds the graceful stop of each process before it is killed.
	StopTimeout = 30 * time.Second

	// EnvAssets names a directory holding etcd and kube-apiserver to use instead of <module root>/bin/testbin.
	EnvAssets = "KUBEBUILDER_ASSETS"
	// envAttachOutput is envtest's switch to send the processes' output to stdout.
	envAttachOutput = "KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT"
)

// Seed is a running kube-apiserver with its etcd.
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
	// StartDuration is how long the start took, from launching etcd to the default namespace being served.
	StartDuration time.Duration

	env      *envtest.Environment
	logs     []*os.File
	shared   bool
	stopOnce sync.Once
	stopErr  error
}

// Start starts a seed that is stopped when the test ends. The test fails if the binaries are missing (run `make
// testbin`) or the seed does not start.
func Start(t testing.TB) *Seed {
	t.Helper()
	s, err := start(t.TempDir())
	if err != nil {
		t.Fatalf("seedtest: %v", err)
	}
	t.Logf("seedtest: seed %s started in %v", s.Config.Host, s.StartDuration.Round(time.Millisecond))
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
		if s.env != nil {
			s.stopErr = s.env.Stop()
		}
		for _, f := range s.logs {
			_ = f.Close()
		}
	})
	return s.stopErr
}

// Namespace creates a namespace with a generated name for the test and returns its name. The seed runs no namespace
// controller, so the namespace is not removed; it goes with the seed.
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
	started bool
	seed    *Seed
	err     error
}

// Main runs the tests of a package whose tests share one seed through StartShared, then stops that seed and exits
// with the tests' status. Call it from TestMain:
//
//	func TestMain(m *testing.M) { seedtest.Main(m) }
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.inMain = true
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
			shared.seed, err = start(dir)
			if err != nil {
				_ = os.RemoveAll(dir)
			}
		}
		if err != nil {
			shared.err = err
		} else {
			shared.seed.shared = true
			t.Logf("seedtest: shared seed %s started in %v", shared.seed.Config.Host,
				shared.seed.StartDuration.Round(time.Millisecond))
		}
	}
	if shared.err != nil {
		t.Fatalf("seedtest: shared seed: %v", shared.err)
	}
	return shared.seed
}

// start starts a seed whose files go to dir. On error nothing is left running.
func start(dir string) (_ *Seed, err error) {
	etcdBin, apiBin, err := binaries()
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
	// A single member has nobody to lose an election to: short ticks only make it elect itself sooner.
	etcd.Configure().Set("heartbeat-interval", "10").Set("election-timeout", "100")
	if etcd.Path, err = processPath(dir, etcdBin); err != nil {
		return nil, err
	}
	falseValue := false
	s.env = &envtest.Environment{
		UseExistingCluster:       &falseValue,
		ControlPlane:             envtest.ControlPlane{Etcd: etcd},
		ControlPlaneStartTimeout: StartTimeout,
		ControlPlaneStopTimeout:  StopTimeout,
	}
	api := s.env.ControlPlane.GetAPIServer()
	api.CertDir = filepath.Join(dir, "pki")
	if api.Path, err = processPath(dir, apiBin); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(api.CertDir, 0o700); err != nil {
		return nil, err
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
		return nil, fmt.Errorf("start seed (etcd %s, kube-apiserver %s): %w", etcdBin, apiBin, err)
	}
	s.StartDuration = time.Since(begin)
	s.Config = cfg
	if s.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	s.Kubeconfig = s.env.KubeConfig
	s.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(s.KubeconfigPath, s.Kubeconfig, 0o600); err != nil {
		return nil, err
	}
	return s, nil
}

// binaries returns the paths of etcd and kube-apiserver: in $KUBEBUILDER_ASSETS when it is set, else in bin/testbin
// of the module root, the first directory holding go.mod at or above the working directory.
func binaries() (etcd, apiserver string, err error) {
	dir := os.Getenv(EnvAssets)
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", "", err
		}
		for root := wd; ; {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				dir = filepath.Join(root, "bin", "testbin")
				break
			}
			parent := filepath.Dir(root)
			if parent == root {
				return "", "", fmt.Errorf("no go.mod at or above %s to find bin/testbin: run `make testbin` and "+
					"set $%s", wd, EnvAssets)
			}
			root = parent
		}
	}
	var missing []string
	find := func(name string) string {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, p)
		}
		return p
	}
	etcd, apiserver = find("etcd"), find("kube-apiserver")
	if len(missing) > 0 {
		return "", "", fmt.Errorf("no executable %s: run `make testbin`", strings.Join(missing, " or "))
	}
	return etcd, apiserver, nil
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
	const max = 4 << 10
	var b strings.Builder
	for _, f := range s.logs {
		r, err := os.Open(f.Name())
		if err != nil {
			continue
		}
		fi, err := r.Stat()
		if err == nil && fi.Size() > max {
			_, err = r.Seek(-max, io.SeekEnd)
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
func StartInDir(dir string) (*Seed, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return start(dir)
}

// Close stops a seed started with StartInDir.
func (s *Seed) Close() error { return s.stop() }
