package charts_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/provider/local"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1pb "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// rbacTimeout bounds each wait of TestRBACSufficesOnSeed.
const rbacTimeout = 30 * time.Second

// TestRBACSufficesOnSeed runs provider-local (extsdk/provider/local, as cmd/provider-local does) against a real seed
// as the chart's ServiceAccount, with only the RBAC the chart renders, and drives a shoot's extension objects
// through create, health checks and delete, plus a backup bucket and entry: every kind of write and read
// provider-local does must be allowed. A permission the chart lacks shows as a forbidden lastError, a health
// condition that is not True, a cache that never syncs, or a heartbeat Lease that is never written.
func TestRBACSufficesOnSeed(t *testing.T) {
	seed := seedtest.Start(t, seedtest.WithCRDs("../crds"))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	r := mustRender(t, map[string]any{"gardener": gardenerValues()})
	if _, err := seed.Client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rbac := seed.Client.RbacV1()
	if _, err := seed.Client.CoreV1().ServiceAccounts(releaseNamespace).Create(ctx, r.serviceAccount, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoles().Create(ctx, r.clusterRole, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, r.clusterRoleBinding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.Roles(releaseNamespace).Create(ctx, r.role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(releaseNamespace).Create(ctx, r.roleBinding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// provider-local as the pod would run it: the ServiceAccount's identity, the Deployment's namespace.
	sa := r.serviceAccount
	cfg := rest.CopyConfig(seed.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + sa.Namespace + ":" + sa.Name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"},
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := extensionsv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	logs := &forbiddenLog{}
	logf.SetLogger(logr.Discard()) // informers log through the global logger; the manager's lines go to logs
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 scheme,
		Logger:                 funcr.New(logs.record, funcr.Options{}),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := local.Add(mgr, local.Config{
		BackupDir:           t.TempDir(),
		Namespace:           releaseNamespace,
		DNSNamespace:        "rbac-coredns",
		HealthCheckInterval: 200 * time.Millisecond,
		HeartbeatInterval:   time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(rbacTimeout):
			t.Error("manager did not stop")
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, rbacTimeout)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatal("the manager's cache did not sync: the ClusterRole does not let it list and watch the extension kinds")
	}

	// The shoot's namespace and Cluster, and the secrets the agent would have written, as the admin.
	admin, err := client.New(seed.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := "shoot--dev--rbac"
	create(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	writeCluster(t, admin, ns)
	create(t, admin, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloudprovider", Namespace: ns},
		Data: map[string][]byte{"token": []byte("local")}})
	create(t, admin, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "user-data", Namespace: ns},
		Data: map[string][]byte{extensionsv1alpha1.OperatingSystemConfigSecretDataKey: []byte("#cloud-config\n")}})
	creds := corev1.SecretReference{Name: "cloudprovider", Namespace: ns}

	infra := &extensionsv1alpha1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "shoot", Namespace: ns}}
	infra.Spec.Region, infra.Spec.SecretRef = "local", creds
	deploy(t, admin, infra)

	cp := &extensionsv1alpha1.ControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "shoot", Namespace: ns}}
	cp.Spec.Region, cp.Spec.SecretRef, cp.Spec.InfrastructureProviderStatus = "local", creds, infra.Status.ProviderStatus
	w := &extensionsv1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Name: "shoot", Namespace: ns}}
	w.Spec.Region, w.Spec.SecretRef, w.Spec.InfrastructureProviderStatus = "local", creds, infra.Status.ProviderStatus
	agentSecret := "osc-a-original"
	w.Spec.Pools = []extensionsv1alpha1.WorkerPool{{
		Name: "a", Minimum: 2, Maximum: 2, Zones: []string{"z1"},
		MaxSurge: intstr.FromInt32(1), MaxUnavailable: intstr.FromInt32(0),
		MachineType: "local", MachineImage: extensionsv1alpha1.MachineImage{Name: "local", Version: "1.0.0"},
		NodeAgentSecretName: &agentSecret,
		UserDataSecretRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "user-data"},
			Key: extensionsv1alpha1.OperatingSystemConfigSecretDataKey},
	}}
	rec := &extensionsv1alpha1.DNSRecord{ObjectMeta: metav1.ObjectMeta{Name: "shoot-internal", Namespace: ns}}
	rec.Spec.Name, rec.Spec.RecordType, rec.Spec.Values = "api.rbac.local.gardener.cloud", extensionsv1alpha1.DNSRecordTypeA, []string{"10.0.0.10"}
	rec.Spec.SecretRef = creds
	nw := &extensionsv1alpha1.Network{ObjectMeta: metav1.ObjectMeta{Name: "shoot", Namespace: ns}}
	nw.Spec.PodCIDR, nw.Spec.ServiceCIDR = "100.96.0.0/11", "100.64.0.0/13"
	b := &extensionsv1alpha1.Bastion{ObjectMeta: metav1.ObjectMeta{Name: "cli-rbac", Namespace: ns}}
	b.Spec.UserData = []byte("#!/bin/bash\n")
	b.Spec.Ingress = []extensionsv1alpha1.BastionIngressPolicy{{IPBlock: networkingv1.IPBlock{CIDR: "192.0.2.0/24"}}}
	ext := &extensionsv1alpha1.Extension{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: ns}}
	bucket := &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: "bucket-rbac"}}
	bucket.Spec.Region, bucket.Spec.SecretRef = "local", creds
	namespaced := []extensionsv1alpha1.Object{cp, w, rec, nw, b, ext}
	for _, obj := range append(namespaced, bucket) {
		deploy(t, admin, obj)
	}
	entry := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: ns + "--4b8c2d1e"}}
	entry.Spec.Region, entry.Spec.BucketName, entry.Spec.SecretRef = "local", bucket.Name, creds
	deploy(t, admin, entry)

	// The health checks read their objects as the ServiceAccount too.
	for _, obj := range []extensionsv1alpha1.Object{cp, w, nw} {
		waitFor(t, admin, obj, "healthy", func(o extensionsv1alpha1.Object) error {
			conds := o.GetExtensionStatus().Conditions
			if len(conds) == 0 {
				return fmt.Errorf("no conditions yet")
			}
			for _, c := range conds {
				if c.Status != "True" {
					return fmt.Errorf("condition %s is %s: %s", c.Type, c.Status, c.Message)
				}
			}
			return nil
		})
	}

	// The heartbeat, in the release namespace.
	waitUntil(t, "heartbeat Lease", func() error {
		if lines := logs.lines(); len(lines) > 0 { // the heartbeat logs its errors rather than report them
			return errors.New(strings.Join(lines, "\n"))
		}
		lease, err := seed.Client.CoordinationV1().Leases(releaseNamespace).Get(ctx, extensionsv1alpha1.HeartbeatLeaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != local.ExtensionName {
			return fmt.Errorf("holder %v", lease.Spec.HolderIdentity)
		}
		return nil
	})

	// Deletion, in the agent's reverse order; each object goes once provider-local has removed what it made and its
	// finalizer.
	for _, obj := range []extensionsv1alpha1.Object{entry, bucket, ext, b, nw, w, rec, cp, infra} {
		if err := admin.Delete(ctx, obj); err != nil {
			t.Fatalf("delete %T %s: %v", obj, obj.GetName(), err)
		}
		waitUntil(t, fmt.Sprintf("%T %s deleted", obj, obj.GetName()), func() error {
			err := admin.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			if le := obj.GetExtensionStatus().LastError; le != nil {
				return fmt.Errorf("lastError %q", le.Description)
			}
			return fmt.Errorf("still there")
		})
	}
	services := &corev1.ServiceList{}
	if err := admin.List(ctx, services, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(services.Items) != 0 {
		t.Errorf("%d Services left after deletion", len(services.Items))
	}
	if lines := logs.lines(); len(lines) > 0 {
		t.Errorf("provider-local was refused:\n%s", strings.Join(lines, "\n"))
	}
}

// forbiddenLog keeps the manager's log lines that report a refusal of the seed.
type forbiddenLog struct {
	mu  sync.Mutex
	got []string
}

func (l *forbiddenLog) record(prefix, args string) {
	if !strings.Contains(args, "forbidden") {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, prefix+" "+args)
}

func (l *forbiddenLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got...)
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// writeCluster writes the Cluster of namespace ns as the agent does: the Shoot in Gardener's JSON.
func writeCluster(t *testing.T, c client.Client, ns string) {
	t.Helper()
	nodes := "10.42.0.0/16"
	shoot, err := kjson.Marshal(&corev1beta1.Shoot{
		ApiVersion: "core.gardener.cloud/v1beta1",
		Kind:       "Shoot",
		Metadata:   &metav1pb.ObjectMeta{Name: "rbac", Namespace: "garden-dev"},
		Spec: &corev1beta1.ShootSpec{Region: "local", Provider: &corev1beta1.Provider{Type: "local"},
			Networking: &corev1beta1.Networking{Nodes: &nodes}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cl := &extensionsv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	cl.Spec.Shoot.Raw = shoot
	cl.Spec.Seed.Raw = []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Seed","metadata":{"name":"local"}}`)
	cl.Spec.CloudProfile.Raw = []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"CloudProfile","metadata":{"name":"local"}}`)
	create(t, c, cl)
}

// deploy creates obj as the agent does (type local, gardener.cloud/operation=reconcile and a timestamp) and waits
// until provider-local reports it Succeeded; obj is then the object read back.
func deploy(t *testing.T, c client.Client, obj extensionsv1alpha1.Object) {
	t.Helper()
	obj.GetExtensionSpec().Type = local.Type
	obj.SetAnnotations(map[string]string{
		extensionsv1alpha1.AnnotationOperation: extensionsv1alpha1.OperationReconcile,
		extensionsv1alpha1.AnnotationTimestamp: time.Now().UTC().Format(time.RFC3339Nano),
	})
	create(t, c, obj)
	waitFor(t, c, obj, "ready", func(o extensionsv1alpha1.Object) error {
		st := o.GetExtensionStatus()
		if st.LastError != nil {
			return fmt.Errorf("lastError %q", st.LastError.Description)
		}
		if st.LastOperation == nil || st.LastOperation.State != extensionsv1alpha1.LastOperationStateSucceeded {
			return fmt.Errorf("lastOperation %+v", st.LastOperation)
		}
		return nil
	})
}

// waitFor reads obj until cond holds, and fails the test with cond's last error after rbacTimeout.
func waitFor(t *testing.T, c client.Client, obj extensionsv1alpha1.Object, what string, cond func(extensionsv1alpha1.Object) error) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%T %s %s", obj, obj.GetName(), what), func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		return cond(obj)
	})
}

// waitUntil polls cond every 20 ms until it returns nil, and fails the test with its last error after rbacTimeout,
// or at once when the error is a refusal (a lastError saying "forbidden"): it does not go away by waiting.
func waitUntil(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(rbacTimeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if strings.Contains(err.Error(), "forbidden") || time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
