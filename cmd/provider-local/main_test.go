package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/deploy/crds"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/provider/local"
	"github.com/trellis-dev/trellis/test/seedtest"
)

func TestRunRejectsBadInvocations(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--extra-type", "Shoot=local"}, `unknown kind`},
		{[]string{"--extra-type", "Worker"}, `want Kind=type`},
		{[]string{"--log-level", "loud"}, `log level`},
		{[]string{"--backup-dir", ""}, `BackupDir is required`},
		{[]string{"stray"}, `unexpected arguments`},
	} {
		var out bytes.Buffer
		if code := run(context.Background(), tc.args, &out); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: output %q lacks %q", tc.args, out.String(), tc.want)
		}
	}
}

// TestRun starts provider-local on a seed without the extension CRDs: it waits for them, then reconciles an
// Infrastructure, renews its heartbeat, and stops cleanly when its context ends (as on SIGTERM).
func TestRun(t *testing.T) {
	seed := seedtest.Start(t)
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--kubeconfig", seed.KubeconfigPath, "--namespace", "extension-provider-local-test",
			"--backup-dir", t.TempDir(), "--heartbeat-interval", "1s", "--log-level", "debug",
			"--extra-type", "OperatingSystemConfig=gardenlinux"}, out)
	}()
	waitFor(t, "the wait for CRDs", func() bool { return strings.Contains(out.String(), "Waiting for the extension CRDs") })

	ax, err := client.New(seed.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, ax); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = extensionsv1alpha1.AddToScheme(scheme)
	c, err := client.New(seed.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := "shoot--dev--demo"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	cluster := &extensionsv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	cluster.Spec.Shoot.Raw = []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"demo","namespace":"garden-dev"},"spec":{"region":"local"}}`)
	cluster.Spec.CloudProfile.Raw = []byte(`{}`)
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	infra := &extensionsv1alpha1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns, Annotations: map[string]string{
		extensionsv1alpha1.AnnotationOperation: extensionsv1alpha1.OperationReconcile,
		extensionsv1alpha1.AnnotationTimestamp: time.Now().UTC().Format(time.RFC3339Nano)}}}
	infra.Spec.Type = local.Type
	if err := c.Create(ctx, infra); err != nil {
		t.Fatal(err)
	}
	osc := &extensionsv1alpha1.OperatingSystemConfig{ObjectMeta: metav1.ObjectMeta{Name: "osc-pool-init", Namespace: ns, Annotations: map[string]string{
		extensionsv1alpha1.AnnotationOperation: extensionsv1alpha1.OperationReconcile}}}
	osc.Spec.Type, osc.Spec.Purpose = "gardenlinux", extensionsv1alpha1.OperatingSystemConfigPurposeProvision
	if err := c.Create(ctx, osc); err != nil {
		t.Fatal(err)
	}
	for _, o := range []extensionsv1alpha1.Object{infra, osc} {
		waitFor(t, o.GetName()+" succeeded", func() bool {
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return false
			}
			lo := o.GetExtensionStatus().LastOperation
			return lo != nil && lo.State == extensionsv1alpha1.LastOperationStateSucceeded
		})
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: local.InfrastructureConfigMap}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("infrastructure ConfigMap: %v", err)
	}
	waitFor(t, "the heartbeat", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "extension-provider-local-test", Name: extensionsv1alpha1.HeartbeatLeaseName},
			&coordinationv1.Lease{}) == nil
	})

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d, want 0; output:\n%s", code, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("provider-local did not stop")
	}
	if testing.Verbose() {
		t.Log(out.String())
	}
	if !strings.Contains(out.String(), "Stopped") {
		t.Errorf("output lacks the stop:\n%s", out.String())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
