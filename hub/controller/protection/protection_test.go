package protection_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/controller/protection"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

// bound is how long the controllers may take to react (they react at once).
const bound = 10 * time.Second

type garden struct {
	t   *testing.T
	reg *api.Registry
}

// start runs the protection controllers on a real store.
func start(t *testing.T) *garden {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reg, err := api.NewRegistry(ctx, storetest.NewStore(t), grpc.NewServer())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := protection.New(protection.Config{Source: reg})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cs.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &garden{t: t, reg: reg}
}

func (g *garden) col(group, resource string) *store.Collection {
	c, ok := g.reg.Collection(schema.GroupResource{Group: group, Resource: resource})
	if !ok {
		g.t.Fatalf("%s not served", resource)
	}
	return c
}

func (g *garden) create(c *store.Collection, obj store.Object) {
	g.t.Helper()
	if _, err := c.Create(context.Background(), obj); err != nil {
		g.t.Fatal(err)
	}
}

func (g *garden) delete(c *store.Collection, ns, name string) {
	g.t.Helper()
	if _, _, err := c.Delete(context.Background(), ns, name, nil); err != nil {
		g.t.Fatal(err)
	}
}

func (g *garden) get(c *store.Collection, ns, name string) store.Object {
	obj, err := c.Get(context.Background(), ns, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		g.t.Fatal(err)
	}
	return obj
}

func (g *garden) eventually(what string, cond func() bool) {
	g.t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			g.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *garden) consistently(what string, cond func() bool) {
	g.t.Helper()
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if !cond() {
			g.t.Fatalf("%s stopped holding", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *garden) has(c *store.Collection, ns, name, finalizer string) bool {
	o := g.get(c, ns, name)
	return o != nil && slices.Contains(o.GetMetadata().GetFinalizers(), finalizer)
}

func shoot(name string, mutate func(*corev1beta1.ShootSpec)) *corev1beta1.Shoot {
	s := &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: name}, Spec: &corev1beta1.ShootSpec{Region: "r"}}
	mutate(s.Spec)
	return s
}

func meta(ns, name string) *metav1.ObjectMeta { return &metav1.ObjectMeta{Namespace: ns, Name: name} }

// TestCloudProfileExposureClassQuota: each is held while used and goes when the last user goes.
func TestCloudProfileExposureClassQuota(t *testing.T) {
	g := start(t)
	shoots := g.col("core.gardener.cloud", "shoots")
	cps := g.col("core.gardener.cloud", "cloudprofiles")
	ncps := g.col("core.gardener.cloud", "namespacedcloudprofiles")
	ecs := g.col("core.gardener.cloud", "exposureclasses")
	quotas := g.col("core.gardener.cloud", "quotas")
	sbs := g.col("core.gardener.cloud", "secretbindings")
	g.create(cps, &corev1beta1.CloudProfile{Metadata: meta("", "aws")})
	g.create(ncps, &corev1beta1.NamespacedCloudProfile{Metadata: meta("garden-dev", "custom"),
		Spec: &corev1beta1.NamespacedCloudProfileSpec{Parent: &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: "aws"}}})
	g.create(ecs, &corev1beta1.ExposureClass{Metadata: meta("", "internet"), Handler: "internet-config"})
	g.create(quotas, &corev1beta1.Quota{Metadata: meta("garden-dev", "small"), Spec: &corev1beta1.QuotaSpec{}})
	g.create(g.col("", "secrets"), &kcorev1.Secret{Metadata: meta("garden-dev", "creds")})
	g.create(sbs, &corev1beta1.SecretBinding{Metadata: meta("garden-dev", "b"), SecretRef: &metav1.SecretReference{Name: "creds"},
		Quotas: []*metav1.ObjectReference{{Name: "small"}}})
	g.create(shoots, shoot("uses-ncp", func(s *corev1beta1.ShootSpec) {
		s.CloudProfile = &corev1beta1.CloudProfileReference{Kind: "NamespacedCloudProfile", Name: "custom"}
		s.ExposureClassName = proto.String("internet")
	}))
	g.eventually("the finalizers", func() bool {
		return g.has(cps, "", "aws", "gardener") && g.has(ncps, "garden-dev", "custom", "gardener") &&
			g.has(ecs, "", "internet", "gardener") && g.has(quotas, "garden-dev", "small", "gardener")
	})
	g.delete(cps, "", "aws")
	g.delete(ncps, "garden-dev", "custom")
	g.delete(ecs, "", "internet")
	g.delete(quotas, "garden-dev", "small")
	g.consistently("everything while used", func() bool {
		return g.get(cps, "", "aws") != nil && g.get(ncps, "garden-dev", "custom") != nil && g.get(ecs, "", "internet") != nil && g.get(quotas, "garden-dev", "small") != nil
	})
	// The shoot goes: the namespaced profile and the exposure class follow; the profile waits for its child.
	g.delete(shoots, "garden-dev", "uses-ncp")
	g.eventually("the namespaced profile and the exposure class to go", func() bool {
		return g.get(ncps, "garden-dev", "custom") == nil && g.get(ecs, "", "internet") == nil
	})
	g.eventually("the cloud profile to go after its child", func() bool { return g.get(cps, "", "aws") == nil })
	// The quota waits for its binding.
	g.consistently("the quota while a binding lists it", func() bool { return g.get(quotas, "garden-dev", "small") != nil })
	g.delete(sbs, "garden-dev", "b")
	g.eventually("the quota to go after its binding", func() bool { return g.get(quotas, "garden-dev", "small") == nil })
}

// TestBindings: a binding protects and labels its credentials and quotas, is held while shoots use it, and releases
// what no other binding references once it goes; a Secret both kinds reference stays protected until both go.
func TestBindings(t *testing.T) {
	g := start(t)
	shoots := g.col("core.gardener.cloud", "shoots")
	secrets := g.col("", "secrets")
	quotas := g.col("core.gardener.cloud", "quotas")
	sbs := g.col("core.gardener.cloud", "secretbindings")
	cbs := g.col("security.gardener.cloud", "credentialsbindings")
	g.create(secrets, &kcorev1.Secret{Metadata: meta("garden-dev", "creds")})
	g.create(quotas, &corev1beta1.Quota{Metadata: meta("garden-dev", "q"), Spec: &corev1beta1.QuotaSpec{}})
	g.create(sbs, &corev1beta1.SecretBinding{Metadata: meta("garden-dev", "sb"), SecretRef: &metav1.SecretReference{Name: "creds"},
		Quotas: []*metav1.ObjectReference{{Name: "q"}}, Provider: &corev1beta1.SecretBindingProvider{Type: "aws,gcp"}})
	g.create(cbs, &securityv1alpha1.CredentialsBinding{Metadata: meta("garden-dev", "cb"),
		CredentialsRef: &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Name: "creds", Namespace: "garden-dev"},
		Provider:       &securityv1alpha1.CredentialsBindingProvider{Type: "aws"}})
	g.create(shoots, shoot("s", func(s *corev1beta1.ShootSpec) { s.SecretBindingName = proto.String("sb") }))

	labels := func(c *store.Collection, ns, name string) map[string]string {
		o := g.get(c, ns, name)
		if o == nil {
			return nil
		}
		return o.GetMetadata().GetLabels()
	}
	g.eventually("the secret protected and labelled by both kinds", func() bool {
		l := labels(secrets, "garden-dev", "creds")
		return g.has(secrets, "garden-dev", "creds", protection.FinalizerExternal) && l[protection.LabelSecretBindingReference] == "true" &&
			l[protection.LabelCredentialsBindingReference] == "true" && l["provider.shoot.gardener.cloud/aws"] == "true" &&
			l["provider.shoot.gardener.cloud/gcp"] == "true" && labels(quotas, "garden-dev", "q")[protection.LabelSecretBindingReference] == "true" &&
			g.has(sbs, "garden-dev", "sb", "gardener") && g.has(cbs, "garden-dev", "cb", "gardener")
	})
	g.delete(sbs, "garden-dev", "sb")
	g.consistently("the secret binding while the shoot uses it", func() bool { return g.get(sbs, "garden-dev", "sb") != nil })
	g.delete(shoots, "garden-dev", "s")
	g.eventually("the secret binding to go", func() bool { return g.get(sbs, "garden-dev", "sb") == nil })
	g.eventually("the secret binding's references released", func() bool {
		l := labels(secrets, "garden-dev", "creds")
		_, sbLabel := l[protection.LabelSecretBindingReference]
		_, quotaLabel := labels(quotas, "garden-dev", "q")[protection.LabelSecretBindingReference]
		return !sbLabel && !quotaLabel
	})
	// The credentials binding still references the secret: it stays protected, with its provider labels.
	if !g.has(secrets, "garden-dev", "creds", protection.FinalizerExternal) || labels(secrets, "garden-dev", "creds")["provider.shoot.gardener.cloud/aws"] != "true" {
		t.Fatalf("the secret lost its protection while a credentials binding references it: %v", g.get(secrets, "garden-dev", "creds"))
	}
	g.delete(cbs, "garden-dev", "cb")
	g.eventually("the secret released by the last binding", func() bool {
		return !g.has(secrets, "garden-dev", "creds", protection.FinalizerExternal) && len(labels(secrets, "garden-dev", "creds")) == 0
	})
	g.delete(secrets, "garden-dev", "creds")
	if g.get(secrets, "garden-dev", "creds") != nil {
		t.Fatal("the released secret did not go at once")
	}
}

// TestShootReferences: the secrets and config maps a shoot references are protected while a shoot references them;
// Gardener-managed secrets are left alone.
func TestShootReferences(t *testing.T) {
	g := start(t)
	shoots := g.col("core.gardener.cloud", "shoots")
	secrets := g.col("", "secrets")
	configMaps := g.col("", "configmaps")
	g.create(secrets, &kcorev1.Secret{Metadata: meta("garden-dev", "dns")})
	g.create(secrets, &kcorev1.Secret{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "managed", Labels: map[string]string{"gardener.cloud/role": "internal-domain"}}})
	g.create(configMaps, &kcorev1.ConfigMap{Metadata: meta("garden-dev", "audit")})
	g.create(shoots, shoot("s", func(s *corev1beta1.ShootSpec) {
		s.Dns = &corev1beta1.DNS{Providers: []*corev1beta1.DNSProvider{{SecretName: proto.String("dns")}, {SecretName: proto.String("managed")}}}
		s.Kubernetes = &corev1beta1.Kubernetes{KubeApiServer: &corev1beta1.KubeAPIServerConfig{AuditConfig: &corev1beta1.AuditConfig{
			AuditPolicy: &corev1beta1.AuditPolicy{ConfigMapRef: &metav1.ObjectReference{Name: "audit"}}}}}
	}))
	const f = protection.FinalizerReferenceProtection
	g.eventually("the references protected", func() bool {
		return g.has(secrets, "garden-dev", "dns", f) && g.has(configMaps, "garden-dev", "audit", f) && g.has(shoots, "garden-dev", "s", f)
	})
	if g.has(secrets, "garden-dev", "managed", f) {
		t.Error("a Gardener-managed secret got the finalizer")
	}
	// The shoot stops referencing the audit policy: it is released, the DNS secret stays protected.
	if _, err := shoots.GuaranteedUpdate(context.Background(), "garden-dev", "s", false, func(cur store.Object) (store.Object, error) {
		cur.(*corev1beta1.Shoot).Spec.Kubernetes = nil
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	g.eventually("the audit config map released", func() bool { return !g.has(configMaps, "garden-dev", "audit", f) })
	if !g.has(secrets, "garden-dev", "dns", f) {
		t.Fatal("the still referenced DNS secret was released")
	}
	// The shoot is deleted (no agent finalizer here): the secret is released and the shoot goes.
	g.delete(shoots, "garden-dev", "s")
	g.eventually("the shoot gone and the secret released", func() bool {
		return g.get(shoots, "garden-dev", "s") == nil && !g.has(secrets, "garden-dev", "dns", f)
	})
}
