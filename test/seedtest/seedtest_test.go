package seedtest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestMain(m *testing.M) { Main(m) }

func TestSeed(t *testing.T) {
	t.Parallel()
	s := Start(t, WithCRDs(extensionCRD))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ns, err := s.Client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "seedtest"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeconfig", Namespace: ns.Name, Labels: map[string]string{"a": "b"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"kubeconfig": s.Kubeconfig},
	}
	if _, err := s.Client.CoreV1().Secrets(ns.Name).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create secret: %v", err)
	}

	gotNS, err := s.Client.CoreV1().Namespaces().Get(ctx, "seedtest", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get namespace: %v", err)
	}
	if gotNS.UID == "" || gotNS.Status.Phase != corev1.NamespaceActive {
		t.Errorf("namespace: uid %q, phase %q", gotNS.UID, gotNS.Status.Phase)
	}
	got, err := s.Client.CoreV1().Secrets("seedtest").Get(ctx, "kubeconfig", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get secret: %v", err)
	}
	if !bytes.Equal(got.Data["kubeconfig"], s.Kubeconfig) || got.Labels["a"] != "b" || got.Type != corev1.SecretTypeOpaque {
		t.Errorf("secret read back differs: %+v", got)
	}

	var code int
	body, err := s.Client.Discovery().RESTClient().Get().AbsPath("/healthz").Do(ctx).StatusCode(&code).Raw()
	if err != nil || code != http.StatusOK || string(body) != "ok" {
		t.Errorf("/healthz: %d %q %v", code, body, err)
	}
	v, err := s.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	t.Logf("kube-apiserver %s", v.GitVersion)

	// The kubeconfig file is all another process needs.
	cfg, err := clientcmd.BuildConfigFromFlags("", s.KubeconfigPath)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	if strings.TrimSuffix(cfg.Host, "/") != strings.TrimSuffix(s.Config.Host, "/") || len(cfg.CertData) == 0 || len(cfg.KeyData) == 0 || len(cfg.CAData) == 0 {
		t.Errorf("kubeconfig lacks credentials: host %q, cert %d, key %d, ca %d bytes",
			cfg.Host, len(cfg.CertData), len(cfg.KeyData), len(cfg.CAData))
	}
	other, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.CoreV1().Secrets("seedtest").Get(ctx, "kubeconfig", metav1.GetOptions{}); err != nil {
		t.Errorf("get secret through the kubeconfig: %v", err)
	}
	// The admin may do anything.
	review, err := other.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "*", Group: "*", Resource: "*"},
		},
	}, metav1.CreateOptions{})
	if err != nil || !review.Status.Allowed {
		t.Errorf("admin may not do everything: %v %+v", err, review)
	}

	testExtensionOwnerCollected(t, s)

	begin := time.Now()
	s.Stop()
	t.Logf("seed stopped in %v", time.Since(begin).Round(time.Millisecond))
	s.Stop()
	if _, err := s.Client.Discovery().ServerVersion(); err == nil {
		t.Error("seed still serves after Stop")
	}
}

func TestShared(t *testing.T) {
	var seeds [2]*Seed
	var names [2]string
	for i := range seeds {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			seeds[i] = StartShared(t)
			names[i] = seeds[i].Namespace(t)
			seeds[i].Stop() // does nothing on a shared seed
		})
	}
	if seeds[0] == nil || seeds[0] != seeds[1] {
		t.Fatalf("StartShared returned different seeds: %p %p", seeds[0], seeds[1])
	}
	if names[0] == names[1] || !strings.HasPrefix(names[0], "test-") {
		t.Errorf("namespaces %q and %q", names[0], names[1])
	}
	if _, err := seeds[0].Client.Discovery().ServerVersion(); err != nil {
		t.Errorf("shared seed stopped by a test: %v", err)
	}
}

// fatalTB records Fatalf and ends the goroutine like testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestMissingBinaries(t *testing.T) {
	empty := t.TempDir()
	t.Setenv(EnvAssets, empty)
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(f)
		t.Error("Start returned without binaries")
	}()
	<-done
	if !strings.Contains(f.msg, "run `make testbin`") || !strings.Contains(f.msg, empty) {
		t.Errorf("message %q", f.msg)
	}
}

func TestBinariesFromModuleRoot(t *testing.T) {
	if _, ok := os.LookupEnv(EnvAssets); ok {
		t.Skipf("$%s is set", EnvAssets)
	}
	bins, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	for p, name := range map[string]string{
		bins.etcd: "etcd", bins.apiserver: "kube-apiserver", bins.controllerManager: "kube-controller-manager",
	} {
		if !strings.HasSuffix(p, "/bin/testbin/"+name) {
			t.Errorf("%s %s not from bin/testbin", name, p)
		}
	}
}
