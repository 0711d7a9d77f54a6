package seedtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// collectBound bounds how long the controllers may take to remove what they must remove. They take well under a
// second on an idle machine; the bound is for a loaded 2-core one.
const collectBound = 30 * time.Second

// extensionCRD is Gardener's Extension CRD, read from shared/ beside the repository.
var extensionCRD = filepath.Join("..", "..", "..", "shared", "gardener", "seed-crds",
	"10-crd-extensions.gardener.cloud_extensions.yaml")

// waitGone polls get until it reports NotFound, failing the test after collectBound. It returns how long it took.
func waitGone(t *testing.T, what string, get func(context.Context) error) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), collectBound)
	defer cancel()
	begin := time.Now()
	for {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return time.Since(begin)
		}
		if ctx.Err() != nil {
			t.Fatalf("%s still there after %v (last get: %v)", what, collectBound, err)
		}
		if err != nil {
			t.Logf("get %s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The namespace tests run in parallel with the other slow tests: each waits out the namespace controller's 5 s grace
// period.

func TestNamespaceDeletionCompletes(t *testing.T) {
	t.Parallel()
	s := StartShared(t)
	ctx := context.Background()
	ns := s.Namespace(t)
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "content"}, Data: map[string]string{"a": "b"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	took := waitGone(t, "namespace "+ns, func(ctx context.Context) error {
		got, err := s.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err == nil && got.Status.Phase != corev1.NamespaceTerminating {
			t.Errorf("deleted namespace in phase %q", got.Status.Phase)
		}
		return err
	})
	t.Logf("namespace with a ConfigMap deleted in %v", took.Round(time.Millisecond))
	// Its content went with it, and a name once deleted can be used again.
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("recreate namespace: %v", err)
	}
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "content", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap of the deleted namespace: %v, want NotFound", err)
	}
}

// TestNamespaceHeldByFinalizer checks that a namespace stays Terminating, emptied, while an object in it has a
// finalizer: how a test keeps a namespace Terminating.
func TestNamespaceHeldByFinalizer(t *testing.T) {
	t.Parallel()
	s := StartShared(t)
	ctx := context.Background()
	ns := s.Namespace(t)
	cms := s.Client.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "held", Finalizers: []string{"seedtest.trellis.dev/hold"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The namespace controller has emptied the namespace once the ConfigMap is marked deleted.
	waitCtx, cancel := context.WithTimeout(ctx, collectBound)
	defer cancel()
	for {
		cm, err := cms.Get(waitCtx, "held", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("held ConfigMap: %v", err)
		}
		if cm.DeletionTimestamp != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	got, err := s.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil || got.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("namespace with a held ConfigMap: %v, phase %q; want Terminating", err, got.Status.Phase)
	}
	// Released, the namespace goes at the controller's next look, up to 8 s later: not worth waiting for here.
	if _, err := cms.Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`),
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestOwnerReferencesCollected(t *testing.T) {
	s := StartShared(t)
	ctx := context.Background()
	ns := s.Namespace(t)
	cms, secrets := s.Client.CoreV1().ConfigMaps(ns), s.Client.CoreV1().Secrets(ns)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "owned", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "unowned"}},
	} {
		if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	took := waitGone(t, "owned Secret", func(ctx context.Context) error {
		_, err := secrets.Get(ctx, "owned", metav1.GetOptions{})
		return err
	})
	t.Logf("owned Secret collected %v after its owner's deletion", took.Round(time.Millisecond))
	if _, err := secrets.Get(ctx, "unowned", metav1.GetOptions{}); err != nil {
		t.Errorf("Secret without owner: %v", err)
	}
}

// testExtensionOwnerCollected checks on a seed started WithCRDs(extensionCRD) that a Secret owned by an Extension,
// as an extension controller makes them, goes with the Extension.
func testExtensionOwnerCollected(t *testing.T, s *Seed) {
	t.Helper()
	ctx := context.Background()
	ns := s.Namespace(t)
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	extensions := dyn.Resource(schema.GroupVersionResource{
		Group: "extensions.gardener.cloud", Version: "v1alpha1", Resource: "extensions",
	}).Namespace(ns)
	ext, err := extensions.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.gardener.cloud/v1alpha1",
		"kind":       "Extension",
		"metadata":   map[string]any{"name": "shoot-dns"},
		"spec":       map[string]any{"type": "shoot-dns-service"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Extension: %v", err)
	}
	secrets := s.Client.CoreV1().Secrets(ns)
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: "extension-credentials",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: ext.GetAPIVersion(), Kind: ext.GetKind(), Name: ext.GetName(), UID: ext.GetUID(),
		}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := extensions.Delete(ctx, ext.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	took := waitGone(t, "Secret owned by an Extension", func(ctx context.Context) error {
		_, err := secrets.Get(ctx, "extension-credentials", metav1.GetOptions{})
		return err
	})
	t.Logf("Secret owned by an Extension collected %v after the Extension's deletion", took.Round(time.Millisecond))
}

func TestMissingControllerManager(t *testing.T) {
	bins, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	assets := t.TempDir()
	for name, p := range map[string]string{"etcd": bins.etcd, "kube-apiserver": bins.apiserver} {
		if err := os.Symlink(p, filepath.Join(assets, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvAssets, assets)
	_, err = start(context.Background(), t.TempDir(), options{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(assets, "kube-controller-manager")) ||
		!strings.Contains(err.Error(), "run `make testbin`") {
		t.Errorf("start without kube-controller-manager: %v", err)
	}
}

// TestControllerManagerExitReported runs the real kube-controller-manager against a kubeconfig that does not exist:
// it exits at once, and stopping it reports that.
func TestControllerManagerExitReported(t *testing.T) {
	bins, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path, err := processPath(dir, bins.controllerManager)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	kcm, err := startControllerManager(path, filepath.Join(dir, "missing-kubeconfig"), log, controllers)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-kcm.exited:
	case <-time.After(StartTimeout):
		_ = kcm.stop()
		t.Fatal("kube-controller-manager without a kubeconfig still runs")
	}
	if err := kcm.stop(); err == nil || !strings.Contains(err.Error(), "exited while the seed ran") {
		t.Errorf("stop after exit: %v", err)
	}
	out, _ := os.ReadFile(log.Name())
	if !strings.Contains(string(out), "missing-kubeconfig") {
		t.Errorf("log does not say why:\n%s", out)
	}
}
