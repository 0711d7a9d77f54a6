package controllerregistration_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/hub/controller/controllerregistration"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/store"
	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

type garden struct {
	t                                                        *testing.T
	seeds, shoots, registrations, deployments, installations *store.Collection
}

func newGarden(t *testing.T) *garden {
	h := hubtest.Start(t)
	coll := func(resource string) *store.Collection {
		return controllertest.Collection(t, h.Registry(), "core.gardener.cloud", resource)
	}
	return &garden{t: t, seeds: coll("seeds"), shoots: coll("shoots"), registrations: coll("controllerregistrations"),
		deployments: coll("controllerdeployments"), installations: coll("controllerinstallations")}
}

// installations returns the seed's installations by registration name.
func (g *garden) installationsOf(seed string) map[string]*corev1beta1.ControllerInstallation {
	objs, err := g.installations.ByIndex(g.t.Context(), "seed", seed)
	if err != nil {
		g.t.Fatal(err)
	}
	out := map[string]*corev1beta1.ControllerInstallation{}
	for _, o := range objs {
		ci := o.(*corev1beta1.ControllerInstallation)
		out[ci.GetSpec().GetRegistrationRef().GetName()] = ci
	}
	return out
}

func (g *garden) exists(c *store.Collection, name string) bool {
	g.t.Helper()
	return controllertest.Get[store.Object](g.t, c, "", name) != nil
}

func seed(name string, labels map[string]string) *corev1beta1.Seed {
	return &corev1beta1.Seed{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Seed", Metadata: &metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: &corev1beta1.SeedSpec{Provider: &corev1beta1.SeedProvider{Type: "seedprov", Region: "r"}}}
}

func shoot(name, seedName string) *corev1beta1.Shoot {
	return &corev1beta1.Shoot{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot", Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: name},
		Spec: &corev1beta1.ShootSpec{SeedName: proto.String(seedName), Region: "r",
			Provider: &corev1beta1.Provider{Type: "aws", Workers: []*corev1beta1.Worker{{Name: "pool"}}}}}
}

func registration(name, policy string, resources ...string) *corev1beta1.ControllerRegistration {
	cr := &corev1beta1.ControllerRegistration{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "ControllerRegistration",
		Metadata: &metav1.ObjectMeta{Name: name},
		Spec: &corev1beta1.ControllerRegistrationSpec{Deployment: &corev1beta1.ControllerRegistrationDeployment{
			Policy: proto.String(policy), DeploymentRefs: []*corev1beta1.DeploymentRef{{Name: name}}}}}
	for i := 0; i < len(resources); i += 2 {
		cr.Spec.Resources = append(cr.Spec.Resources, &corev1beta1.ControllerResource{Kind: resources[i], Type: resources[i+1], Primary: proto.Bool(true)})
	}
	return cr
}

func deployment(name, value string) *corev1.ControllerDeployment {
	return &corev1.ControllerDeployment{ApiVersion: "core.gardener.cloud/v1", Kind: "ControllerDeployment", Metadata: &metav1.ObjectMeta{Name: name},
		Helm: &corev1.HelmControllerDeployment{RawChart: []byte("chart"), Values: &metav1.RawExtension{Raw: []byte(`{"value":"` + value + `"}`)}}}
}

func setRequired(status string) func(store.Object) {
	return func(o store.Object) {
		ci := o.(*corev1beta1.ControllerInstallation)
		ci.Status = &corev1beta1.ControllerInstallationStatus{Conditions: []*metav1.Condition{{Type: controllerregistration.ConditionRequired, Status: status, LastTransitionTime: timestamppb.Now()}}}
	}
}

// TestOnDemand: an installation exists exactly while the seed needs the registration's kinds, or while the agent
// reports its extension objects as still there (Required).
func TestOnDemand(t *testing.T) {
	g := newGarden(t)
	controllertest.Create(t, g.seeds, seed("seed-1", nil))
	controllertest.Create(t, g.deployments, deployment("provider-aws", "a"))
	controllertest.Create(t, g.registrations, registration("provider-aws", controllerregistration.PolicyOnDemand, "Infrastructure", "aws", "ControlPlane", "aws", "Worker", "aws"))
	// Not needed without shoots: the seed's own provider is another one.
	controllertest.Consistently(t, "no installation without a shoot", time.Second, func() bool { return len(g.installationsOf("seed-1")) == 0 })

	controllertest.Create(t, g.shoots, shoot("s1", "seed-1"))
	var ci *corev1beta1.ControllerInstallation
	controllertest.Eventually(t, "an installation for the shoot's provider", func() bool {
		ci = g.installationsOf("seed-1")["provider-aws"]
		return ci != nil
	})
	if ci.GetSpec().GetDeploymentRef().GetName() != "provider-aws" || ci.GetSpec().GetSeedRef().GetName() != "seed-1" {
		t.Fatalf("installation spec %v", ci.GetSpec())
	}
	if n := ci.GetMetadata().GetName(); len(n) != len("provider-aws-")+5 || n[:len("provider-aws-")] != "provider-aws-" {
		t.Fatalf("installation name %q, want provider-aws-<5 characters>", n)
	}
	labels := ci.GetMetadata().GetLabels()
	for _, l := range []string{controllerregistration.LabelSeedSpecHash, controllerregistration.LabelRegistrationSpecHash, controllerregistration.LabelDeploymentHash} {
		if labels[l] == "" {
			t.Fatalf("installation lacks label %s: %v", l, labels)
		}
	}
	// A second shoot needs nothing new: still one installation.
	controllertest.Create(t, g.shoots, shoot("s2", "seed-1"))
	// The deployment changes: the installation's deployment hash follows, nothing else.
	controllertest.Update(t, g.deployments, "", "provider-aws", false, func(o *corev1.ControllerDeployment) {
		o.Helm.Values.Raw = []byte(`{"value":"b"}`)
	})
	controllertest.Eventually(t, "the deployment hash to follow", func() bool {
		cur := g.installationsOf("seed-1")["provider-aws"]
		return cur.GetMetadata().GetLabels()[controllerregistration.LabelDeploymentHash] != labels[controllerregistration.LabelDeploymentHash]
	})
	if got := g.installationsOf("seed-1"); len(got) != 1 || got["provider-aws"].GetMetadata().GetName() != ci.GetMetadata().GetName() {
		t.Fatalf("installations after the update: %v", got)
	}

	// The agent reports the extension objects as still there: the installation stays after the shoots go.
	controllertest.Update(t, g.installations, "", ci.GetMetadata().GetName(), true, setRequired("True"))
	controllertest.Delete(t, g.shoots, "garden-dev", "s1")
	controllertest.Delete(t, g.shoots, "garden-dev", "s2")
	controllertest.Consistently(t, "the installation while Required", time.Second, func() bool { return g.installationsOf("seed-1")["provider-aws"] != nil })
	// Once they are gone it goes too.
	controllertest.Update(t, g.installations, "", ci.GetMetadata().GetName(), true, setRequired("False"))
	controllertest.Eventually(t, "the installation to go", func() bool { return len(g.installationsOf("seed-1")) == 0 })
}

func TestPolicies(t *testing.T) {
	g := newGarden(t)
	controllertest.Create(t, g.seeds, seed("seed-1", map[string]string{"env": "prod"}))
	controllertest.Create(t, g.seeds, seed("seed-2", map[string]string{"env": "dev"}))
	for _, n := range []string{"always", "except-no-shoots", "selected"} {
		controllertest.Create(t, g.deployments, deployment(n, "a"))
	}
	controllertest.Create(t, g.registrations, registration("always", controllerregistration.PolicyAlways, "Extension", "a"))
	controllertest.Create(t, g.registrations, registration("except-no-shoots", controllerregistration.PolicyAlwaysExceptNoShoots, "Extension", "b"))
	sel := registration("selected", controllerregistration.PolicyAlways, "Extension", "c")
	sel.Spec.Resources[0].Primary = proto.Bool(false)
	sel.Spec.Deployment.SeedSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	controllertest.Create(t, g.registrations, sel)

	names := func(seed string) []string {
		var out []string
		for n := range g.installationsOf(seed) {
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	controllertest.Eventually(t, "Always everywhere, the selected one only on the selected seed", func() bool {
		return slices.Equal(names("seed-1"), []string{"always", "selected"}) && slices.Equal(names("seed-2"), []string{"always"})
	})
	controllertest.Create(t, g.shoots, shoot("s1", "seed-2"))
	controllertest.Eventually(t, "AlwaysExceptNoShoots once the seed has a shoot", func() bool {
		return slices.Equal(names("seed-2"), []string{"always", "except-no-shoots"}) && slices.Equal(names("seed-1"), []string{"always", "selected"})
	})
	controllertest.Delete(t, g.shoots, "garden-dev", "s1")
	controllertest.Eventually(t, "AlwaysExceptNoShoots gone with the last shoot", func() bool { return slices.Equal(names("seed-2"), []string{"always"}) })
	// The seed's labels change: the selected registration follows.
	controllertest.Update(t, g.seeds, "", "seed-2", false, func(o store.Object) { o.GetMetadata().Labels["env"] = "prod" })
	controllertest.Eventually(t, "the selected registration on the relabelled seed", func() bool {
		return slices.Equal(names("seed-2"), []string{"always", "selected"})
	})
}

// TestFinalizers: a registration stays while installations use it, a deployment while registrations reference it,
// a seed while installations are deployed to it.
func TestFinalizers(t *testing.T) {
	g := newGarden(t)
	controllertest.Create(t, g.seeds, seed("seed-1", nil))
	controllertest.Create(t, g.deployments, deployment("ext", "a"))
	controllertest.Create(t, g.registrations, registration("ext", controllerregistration.PolicyAlways, "Extension", "e"))
	var ci *corev1beta1.ControllerInstallation
	controllertest.Eventually(t, "the installation", func() bool { ci = g.installationsOf("seed-1")["ext"]; return ci != nil })
	hasFinalizer := func(c *store.Collection, name, f string) bool {
		obj, err := c.Get(context.Background(), "", name)
		return err == nil && slices.Contains(obj.GetMetadata().GetFinalizers(), f)
	}
	controllertest.Eventually(t, "the finalizers", func() bool {
		return hasFinalizer(g.registrations, "ext", controllerregistration.FinalizerControllerRegistration) &&
			hasFinalizer(g.deployments, "ext", controllerregistration.FinalizerControllerDeployment) &&
			hasFinalizer(g.seeds, "seed-1", controllerregistration.FinalizerControllerRegistration)
	})
	// The agent's finalizer keeps the installation until it has uninstalled the controller.
	const agentFinalizer = "core.gardener.cloud/controllerinstallation"
	controllertest.Update(t, g.installations, "", ci.GetMetadata().GetName(), false, func(o store.Object) {
		o.GetMetadata().Finalizers = append(o.GetMetadata().Finalizers, agentFinalizer)
	})

	// Deleting the deployment waits for the registration; deleting the registration waits for the installation,
	// which the registration's deletion does not renew.
	controllertest.Delete(t, g.deployments, "", "ext")
	controllertest.Delete(t, g.registrations, "", "ext")
	controllertest.Consistently(t, "the registration and the deployment while the installation is there", time.Second, func() bool {
		return g.exists(g.registrations, "ext") && g.exists(g.deployments, "ext")
	})
	// The Always registration is being deleted, so the seed no longer wants it: its installation is marked.
	controllertest.Eventually(t, "the installation marked for deletion", func() bool {
		cur := g.installationsOf("seed-1")["ext"]
		return cur != nil && cur.GetMetadata().GetDeletionTimestamp() != nil
	})
	// The seed's deletion waits for the installation too.
	controllertest.Delete(t, g.seeds, "", "seed-1")
	controllertest.Consistently(t, "the seed while the installation is there", 500*time.Millisecond, func() bool { return g.exists(g.seeds, "seed-1") })

	// The agent has uninstalled: everything goes, in order.
	controllertest.Update(t, g.installations, "", ci.GetMetadata().GetName(), false, func(o store.Object) {
		o.GetMetadata().Finalizers = slices.DeleteFunc(o.GetMetadata().Finalizers, func(f string) bool { return f == agentFinalizer })
	})
	controllertest.Eventually(t, "the registration, the deployment and the seed to go", func() bool {
		return !g.exists(g.registrations, "ext") && !g.exists(g.deployments, "ext") && !g.exists(g.seeds, "seed-1")
	})
}
