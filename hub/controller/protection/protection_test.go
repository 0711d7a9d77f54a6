package protection_test

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/controller/protection"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

// hold is how long a test checks that the controllers keep an object.
const hold = 500 * time.Millisecond

type garden struct {
	t   *testing.T
	reg *api.Registry
}

// start runs the protection controllers on a real store.
func start(t *testing.T) *garden {
	t.Helper()
	reg := controllertest.NewRegistry(t, protection.Indexes()...)
	cs, err := protection.New(protection.Config{Source: reg})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Start(t, cs)
	return &garden{t: t, reg: reg}
}

func (g *garden) get(c *store.Collection, ns, name string) store.Object {
	g.t.Helper()
	return controllertest.Get[store.Object](g.t, c, ns, name)
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
	shoots := controllertest.Collection(t, g.reg, "core.gardener.cloud", "shoots")
	cps := controllertest.Collection(t, g.reg, "core.gardener.cloud", "cloudprofiles")
	ncps := controllertest.Collection(t, g.reg, "core.gardener.cloud", "namespacedcloudprofiles")
	ecs := controllertest.Collection(t, g.reg, "core.gardener.cloud", "exposureclasses")
	quotas := controllertest.Collection(t, g.reg, "core.gardener.cloud", "quotas")
	sbs := controllertest.Collection(t, g.reg, "core.gardener.cloud", "secretbindings")
	controllertest.Create(t, cps, &corev1beta1.CloudProfile{Metadata: meta("", "aws")})
	controllertest.Create(t, ncps, &corev1beta1.NamespacedCloudProfile{Metadata: meta("garden-dev", "custom"),
		Spec: &corev1beta1.NamespacedCloudProfileSpec{Parent: &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: "aws"}}})
	controllertest.Create(t, ecs, &corev1beta1.ExposureClass{Metadata: meta("", "internet"), Handler: "internet-config"})
	controllertest.Create(t, quotas, &corev1beta1.Quota{Metadata: meta("garden-dev", "small"), Spec: &corev1beta1.QuotaSpec{}})
	controllertest.Create(t, controllertest.Collection(t, g.reg, "", "secrets"), &kcorev1.Secret{Metadata: meta("garden-dev", "creds")})
	controllertest.Create(t, sbs, &corev1beta1.SecretBinding{Metadata: meta("garden-dev", "b"), SecretRef: &metav1.SecretReference{Name: "creds"},
		Quotas: []*metav1.ObjectReference{{Name: "small"}}})
	controllertest.Create(t, shoots, shoot("uses-ncp", func(s *corev1beta1.ShootSpec) {
		s.CloudProfile = &corev1beta1.CloudProfileReference{Kind: "NamespacedCloudProfile", Name: "custom"}
		s.ExposureClassName = proto.String("internet")
	}))
	controllertest.Eventually(t, "the finalizers", func() bool {
		return g.has(cps, "", "aws", "gardener") && g.has(ncps, "garden-dev", "custom", "gardener") &&
			g.has(ecs, "", "internet", "gardener") && g.has(quotas, "garden-dev", "small", "gardener")
	})
	controllertest.Delete(t, cps, "", "aws")
	controllertest.Delete(t, ncps, "garden-dev", "custom")
	controllertest.Delete(t, ecs, "", "internet")
	controllertest.Delete(t, quotas, "garden-dev", "small")
	controllertest.Consistently(t, "everything while used", hold, func() bool {
		return g.get(cps, "", "aws") != nil && g.get(ncps, "garden-dev", "custom") != nil && g.get(ecs, "", "internet") != nil && g.get(quotas, "garden-dev", "small") != nil
	})
	// The shoot goes: the namespaced profile and the exposure class follow; the profile waits for its child.
	controllertest.Delete(t, shoots, "garden-dev", "uses-ncp")
	controllertest.Eventually(t, "the namespaced profile and the exposure class to go", func() bool {
		return g.get(ncps, "garden-dev", "custom") == nil && g.get(ecs, "", "internet") == nil
	})
	controllertest.Eventually(t, "the cloud profile to go after its child", func() bool { return g.get(cps, "", "aws") == nil })
	// The quota waits for its binding.
	controllertest.Consistently(t, "the quota while a binding lists it", hold, func() bool { return g.get(quotas, "garden-dev", "small") != nil })
	controllertest.Delete(t, sbs, "garden-dev", "b")
	controllertest.Eventually(t, "the quota to go after its binding", func() bool { return g.get(quotas, "garden-dev", "small") == nil })
}

// TestBindings: a binding protects and labels its credentials and quotas, is held while shoots use it, and releases
// what no other binding references once it goes; a Secret both kinds reference stays protected until both go.
func TestBindings(t *testing.T) {
	g := start(t)
	shoots := controllertest.Collection(t, g.reg, "core.gardener.cloud", "shoots")
	secrets := controllertest.Collection(t, g.reg, "", "secrets")
	quotas := controllertest.Collection(t, g.reg, "core.gardener.cloud", "quotas")
	sbs := controllertest.Collection(t, g.reg, "core.gardener.cloud", "secretbindings")
	cbs := controllertest.Collection(t, g.reg, "security.gardener.cloud", "credentialsbindings")
	controllertest.Create(t, secrets, &kcorev1.Secret{Metadata: meta("garden-dev", "creds")})
	controllertest.Create(t, quotas, &corev1beta1.Quota{Metadata: meta("garden-dev", "q"), Spec: &corev1beta1.QuotaSpec{}})
	controllertest.Create(t, sbs, &corev1beta1.SecretBinding{Metadata: meta("garden-dev", "sb"), SecretRef: &metav1.SecretReference{Name: "creds"},
		Quotas: []*metav1.ObjectReference{{Name: "q"}}, Provider: &corev1beta1.SecretBindingProvider{Type: "aws,gcp"}})
	controllertest.Create(t, cbs, &securityv1alpha1.CredentialsBinding{Metadata: meta("garden-dev", "cb"),
		CredentialsRef: &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Name: "creds", Namespace: "garden-dev"},
		Provider:       &securityv1alpha1.CredentialsBindingProvider{Type: "aws"}})
	controllertest.Create(t, shoots, shoot("s", func(s *corev1beta1.ShootSpec) { s.SecretBindingName = proto.String("sb") }))

	labels := func(c *store.Collection, ns, name string) map[string]string {
		o := g.get(c, ns, name)
		if o == nil {
			return nil
		}
		return o.GetMetadata().GetLabels()
	}
	controllertest.Eventually(t, "the secret protected and labelled by both kinds", func() bool {
		l := labels(secrets, "garden-dev", "creds")
		return g.has(secrets, "garden-dev", "creds", protection.FinalizerExternal) && l[protection.LabelSecretBindingReference] == "true" &&
			l[protection.LabelCredentialsBindingReference] == "true" && l["provider.shoot.gardener.cloud/aws"] == "true" &&
			l["provider.shoot.gardener.cloud/gcp"] == "true" && labels(quotas, "garden-dev", "q")[protection.LabelSecretBindingReference] == "true" &&
			g.has(sbs, "garden-dev", "sb", "gardener") && g.has(cbs, "garden-dev", "cb", "gardener")
	})
	controllertest.Delete(t, sbs, "garden-dev", "sb")
	controllertest.Consistently(t, "the secret binding while the shoot uses it", hold, func() bool { return g.get(sbs, "garden-dev", "sb") != nil })
	controllertest.Delete(t, shoots, "garden-dev", "s")
	controllertest.Eventually(t, "the secret binding to go", func() bool { return g.get(sbs, "garden-dev", "sb") == nil })
	controllertest.Eventually(t, "the secret binding's references released", func() bool {
		l := labels(secrets, "garden-dev", "creds")
		_, sbLabel := l[protection.LabelSecretBindingReference]
		_, quotaLabel := labels(quotas, "garden-dev", "q")[protection.LabelSecretBindingReference]
		return !sbLabel && !quotaLabel
	})
	// The credentials binding still references the secret: it stays protected, with its provider labels.
	if !g.has(secrets, "garden-dev", "creds", protection.FinalizerExternal) || labels(secrets, "garden-dev", "creds")["provider.shoot.gardener.cloud/aws"] != "true" {
		t.Fatalf("the secret lost its protection while a credentials binding references it: %v", g.get(secrets, "garden-dev", "creds"))
	}
	controllertest.Delete(t, cbs, "garden-dev", "cb")
	controllertest.Eventually(t, "the secret released by the last binding", func() bool {
		return !g.has(secrets, "garden-dev", "creds", protection.FinalizerExternal) && len(labels(secrets, "garden-dev", "creds")) == 0
	})
	controllertest.Delete(t, secrets, "garden-dev", "creds")
	if g.get(secrets, "garden-dev", "creds") != nil {
		t.Fatal("the released secret did not go at once")
	}
}

// TestShootReferences: the secrets and config maps a shoot references are protected while a shoot references them;
// Gardener-managed secrets are left alone.
func TestShootReferences(t *testing.T) {
	g := start(t)
	shoots := controllertest.Collection(t, g.reg, "core.gardener.cloud", "shoots")
	secrets := controllertest.Collection(t, g.reg, "", "secrets")
	configMaps := controllertest.Collection(t, g.reg, "", "configmaps")
	controllertest.Create(t, secrets, &kcorev1.Secret{Metadata: meta("garden-dev", "dns")})
	controllertest.Create(t, secrets, &kcorev1.Secret{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "managed", Labels: map[string]string{"gardener.cloud/role": "internal-domain"}}})
	controllertest.Create(t, configMaps, &kcorev1.ConfigMap{Metadata: meta("garden-dev", "audit")})
	controllertest.Create(t, shoots, shoot("s", func(s *corev1beta1.ShootSpec) {
		s.Dns = &corev1beta1.DNS{Providers: []*corev1beta1.DNSProvider{{SecretName: proto.String("dns")}, {SecretName: proto.String("managed")}}}
		s.Kubernetes = &corev1beta1.Kubernetes{KubeApiServer: &corev1beta1.KubeAPIServerConfig{AuditConfig: &corev1beta1.AuditConfig{
			AuditPolicy: &corev1beta1.AuditPolicy{ConfigMapRef: &metav1.ObjectReference{Name: "audit"}}}}}
	}))
	const f = protection.FinalizerReferenceProtection
	controllertest.Eventually(t, "the references protected", func() bool {
		return g.has(secrets, "garden-dev", "dns", f) && g.has(configMaps, "garden-dev", "audit", f) && g.has(shoots, "garden-dev", "s", f)
	})
	if g.has(secrets, "garden-dev", "managed", f) {
		t.Error("a Gardener-managed secret got the finalizer")
	}
	// The shoot stops referencing the audit policy: it is released, the DNS secret stays protected.
	controllertest.Update(t, shoots, "garden-dev", "s", false, func(cur *corev1beta1.Shoot) {
		cur.Spec.Kubernetes = nil
	})
	controllertest.Eventually(t, "the audit config map released", func() bool { return !g.has(configMaps, "garden-dev", "audit", f) })
	if !g.has(secrets, "garden-dev", "dns", f) {
		t.Fatal("the still referenced DNS secret was released")
	}
	// The shoot is deleted (no agent finalizer here): the secret is released and the shoot goes.
	controllertest.Delete(t, shoots, "garden-dev", "s")
	controllertest.Eventually(t, "the shoot gone and the secret released", func() bool {
		return g.get(shoots, "garden-dev", "s") == nil && !g.has(secrets, "garden-dev", "dns", f)
	})
}

// TestShootReferencesShared: a Secret stays protected while any Shoot of its namespace references it, and only
// those count: a Shoot of another namespace referencing a Secret of the same name does not hold it.
func TestShootReferencesShared(t *testing.T) {
	g := start(t)
	shoots := controllertest.Collection(t, g.reg, "core.gardener.cloud", "shoots")
	secrets := controllertest.Collection(t, g.reg, "", "secrets")
	dns := func(s *corev1beta1.ShootSpec) {
		s.Dns = &corev1beta1.DNS{Providers: []*corev1beta1.DNSProvider{{SecretName: proto.String("dns")}}}
	}
	controllertest.Create(t, secrets, &kcorev1.Secret{Metadata: meta("garden-dev", "dns")})
	controllertest.Create(t, secrets, &kcorev1.Secret{Metadata: meta("garden-other", "dns")})
	controllertest.Create(t, shoots, shoot("a", dns))
	controllertest.Create(t, shoots, shoot("b", dns))
	other := shoot("c", dns)
	other.Metadata.Namespace = "garden-other"
	controllertest.Create(t, shoots, other)
	const f = protection.FinalizerReferenceProtection
	controllertest.Eventually(t, "both namespaces' secrets protected", func() bool {
		return g.has(secrets, "garden-dev", "dns", f) && g.has(secrets, "garden-other", "dns", f) &&
			g.has(shoots, "garden-dev", "a", f) && g.has(shoots, "garden-dev", "b", f)
	})
	controllertest.Delete(t, shoots, "garden-dev", "a")
	controllertest.Eventually(t, "shoot a gone", func() bool { return g.get(shoots, "garden-dev", "a") == nil })
	time.Sleep(hold)
	if !g.has(secrets, "garden-dev", "dns", f) {
		t.Fatal("the secret shoot b still references was released")
	}
	controllertest.Delete(t, shoots, "garden-dev", "b")
	controllertest.Eventually(t, "garden-dev's secret released once no shoot of its namespace references it", func() bool {
		return g.get(shoots, "garden-dev", "b") == nil && !g.has(secrets, "garden-dev", "dns", f)
	})
	if !g.has(secrets, "garden-other", "dns", f) {
		t.Fatal("garden-other's secret, still referenced there, was released")
	}
}
