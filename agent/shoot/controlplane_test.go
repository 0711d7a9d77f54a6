package shoot

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/trellis-dev/trellis/agent/shoot/imagevector"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func testOperation(spec *corev1beta1.ShootSpec) *operation {
	return &operation{
		c:       &Controller{cfg: Config{TunnelDomain: func() string { return "tunnel.example.com" }}},
		shoot:   &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "s"}, Spec: spec},
		seed:    &corev1beta1.Seed{Spec: &corev1beta1.SeedSpec{Dns: &corev1beta1.SeedDNS{Internal: &corev1beta1.SeedDNSProviderConfig{Domain: "internal.example.com"}}}},
		project: "dev", ns: "shoot--dev--s",
	}
}

// TestKubeAPIServerFlags: the kube-apiserver's flags follow spec.kubernetes.kubeAPIServer.
func TestKubeAPIServerFlags(t *testing.T) {
	op := testOperation(&corev1beta1.ShootSpec{
		Kubernetes: &corev1beta1.Kubernetes{Version: "1.31.1", KubeApiServer: &corev1beta1.KubeAPIServerConfig{
			AdmissionPlugins: []*corev1beta1.AdmissionPlugin{{Name: "PodNodeSelector"}, {Name: "DefaultStorageClass", Disabled: proto.Bool(true)}},
			FeatureGates:     map[string]bool{"B": false, "A": true},
			RuntimeConfig:    map[string]bool{"batch/v2alpha1": true},
			OidcConfig: &corev1beta1.OIDCConfig{IssuerUrl: proto.String("https://issuer.example.com"), ClientId: proto.String("kube"),
				UsernameClaim: proto.String("email"), RequiredClaims: map[string]string{"b": "2", "a": "1"}},
			EventTtl: proto.String("2h"),
		}},
		Networking: &corev1beta1.Networking{Services: proto.String("10.4.0.0/16")},
	})
	flags := op.kubeAPIServerFlags(true)
	for _, want := range []string{
		"--enable-admission-plugins=PodNodeSelector", "--disable-admission-plugins=DefaultStorageClass",
		"--feature-gates=A=true,B=false", "--runtime-config=batch/v2alpha1=true",
		"--oidc-issuer-url=https://issuer.example.com", "--oidc-client-id=kube", "--oidc-username-claim=email",
		"--oidc-required-claim=a=1", "--oidc-required-claim=b=2", "--event-ttl=2h",
		"--service-cluster-ip-range=10.4.0.0/16", "--authorization-mode=RBAC",
		"--audit-policy-file=/etc/kubernetes/audit/audit-policy.yaml",
		"--etcd-servers=https://etcd-main-client.shoot--dev--s.svc:2379",
		"--service-account-issuer=https://api.s.dev.internal.example.com",
		"--shutdown-watch-termination-grace-period=5s",
	} {
		if !slices.Contains(flags, want) {
			t.Errorf("flags lack %s:\n%s", want, strings.Join(flags, "\n"))
		}
	}
	if kubeAPIServerWatchDrain >= kubeAPIServerTerminationGrace/2 {
		t.Errorf("kube-apiserver ends its watches within %v of a %v grace period: too little is left for the rest of its shutdown",
			kubeAPIServerWatchDrain, kubeAPIServerTerminationGrace)
	}
	if i, j := slices.Index(flags, "--oidc-required-claim=a=1"), slices.Index(flags, "--oidc-required-claim=b=2"); i > j {
		t.Error("required claims are not in a stable order")
	}
	op.shoot.Spec.Provider = &corev1beta1.Provider{Workers: []*corev1beta1.Worker{{Name: "w"}}}
	if flags := op.kubeAPIServerFlags(false); !slices.Contains(flags, "--authorization-mode=Node,RBAC") ||
		slices.ContainsFunc(flags, func(f string) bool { return strings.HasPrefix(f, "--audit") }) {
		t.Errorf("with workers and without audit policy: %v", flags)
	}
}

// TestKubeAPIServerNames: the serving certificate names the Service, the domains and the hub's tunnel name.
func TestKubeAPIServerNames(t *testing.T) {
	op := testOperation(&corev1beta1.ShootSpec{Dns: &corev1beta1.DNS{Domain: proto.String("s.example.org")}})
	names := op.kubeAPIServerNames()
	for _, want := range []string{"kube-apiserver", "kube-apiserver.shoot--dev--s", "kube-apiserver.shoot--dev--s.svc",
		"kube-apiserver.shoot--dev--s.svc.cluster.local", "api.s.dev.internal.example.com", "api.s.example.org",
		"api.s.dev.tunnel.example.com"} {
		if !slices.Contains(names, want) {
			t.Errorf("names lack %s: %v", want, names)
		}
	}
}

// TestImageFollowsVersion: a Kubernetes version update changes the components' images (and so rolls them).
func TestImageFollowsVersion(t *testing.T) {
	op := testOperation(&corev1beta1.ShootSpec{Kubernetes: &corev1beta1.Kubernetes{Version: "1.31.1"}})
	op.c.cfg.Images = imagevector.Default()
	before, err := op.image(imagevector.KubeAPIServer)
	if err != nil {
		t.Fatal(err)
	}
	op.shoot.Spec.Kubernetes.Version = "1.32.0"
	after, err := op.image(imagevector.KubeAPIServer)
	if err != nil || before == after || !strings.HasSuffix(after, ":v1.32.0") {
		t.Fatalf("image %s → %s (%v)", before, after, err)
	}
}

// TestReady: a Deployment is ready only when its controller saw the spec and every replica is updated and
// available; a StatefulSet when its replicas are ready on the current revision.
func TestReady(t *testing.T) {
	one := proto.Int32(1)
	dep := func(gen, observed int64, updated, replicas, available int32) *appsv1.Deployment {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: one}}
		d.Generation, d.Status = gen, appsv1.DeploymentStatus{ObservedGeneration: observed, UpdatedReplicas: updated, Replicas: replicas, AvailableReplicas: available}
		return d
	}
	for name, tc := range map[string]struct {
		d    *appsv1.Deployment
		want bool
	}{
		"ready":             {dep(2, 2, 1, 1, 1), true},
		"old generation":    {dep(2, 1, 1, 1, 1), false},
		"not updated":       {dep(2, 2, 0, 1, 1), false},
		"old pod remaining": {dep(2, 2, 1, 2, 1), false},
		"not available":     {dep(2, 2, 1, 1, 0), false},
	} {
		if ok, why := ready(tc.d); ok != tc.want {
			t.Errorf("%s: ready %v (%s), want %v", name, ok, why, tc.want)
		}
	}
	sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: one}, Status: appsv1.StatefulSetStatus{ReadyReplicas: 1,
		CurrentRevision: "a", UpdateRevision: "b"}}
	if ok, _ := ready(sts); ok {
		t.Error("a StatefulSet in the middle of an update is ready")
	}
	sts.Status.CurrentRevision = "b"
	if ok, why := ready(sts); !ok {
		t.Errorf("a rolled-out StatefulSet is not ready: %s", why)
	}
}
