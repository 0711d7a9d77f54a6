package controllerregistration_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/controller/controllerregistration"
	"github.com/trellis-dev/trellis/hub/store"
	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// bound is how long the controllers may take to react (they react at once; the bound leaves room for a loaded
// machine and the first leader election).
const bound = 20 * time.Second

type garden struct {
	t                                                        *testing.T
	seeds, shoots, registrations, deployments, installations *store.Collection
}

func newGarden(t *testing.T) *garden {
	h := hubtest.Start(t)
	coll := func(resource string) *store.Collection {
		c, ok := h.Registry().Collection(schema.GroupResource{Group: "core.gardener.cloud", Resource: resource})
		if !ok {
			t.Fatalf("%s not served", resource)
		}
		return c
	}
	return &garden{t: t, seeds: coll("seeds"), shoots: coll("shoots"), registrations: coll("controllerregistrations"),
		deployments: coll("controllerdeployments"), installations: coll("controllerinstallations")}
}

func (g *garden) create(c *store.Collection, obj store.Object) {
	g.t.Helper()
	if _, err := c.Create(g.t.Context(), obj); err != nil {
		g.t.Fatal(err)
	}
}

func (g *garden) update(c *store.Collection, namespace, name string, status bool, mutate func(store.Object)) {
	g.t.Helper()
	if _, err := c.GuaranteedUpdate(g.t.Context(), namespace, name, status, func(cur store.Object) (store.Object, error) {
		mutate(cur)
		return cur, nil
	}); err != nil {
		g.t.Fatal(err)
	}
}

func (g *garden) delete(c *store.Collection, namespace, name string) {
	g.t.Helper()
	if _, _, err := c.Delete(g.t.Context(), namespace, name, nil); err != nil {
		g.t.Fatal(err)
	}
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

func (g *garden) eventually(what string, cond func() bool) {
	g.t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			g.t.Fatalf("timed out after %s waiting for %s", bound, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// consistently fails when cond turns false within d.
func (g *garden) consistently(what string, d time.Duration, cond func() bool) {
	g.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !cond() {
			g.t.Fatalf("%s stopped holding", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *garden) exists(c *store.Collection, name string) bool {
	_, err := c.Get(g.t.Context(), "", name)
	if err != nil && !apierrors.IsNotFound(err) {
		g.t.Fatal(err)
	}
	return err == nil
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
	g.create(g.seeds, seed("seed-1", nil))
	g.create(g.deployments, deployment("provider-aws", "a"))
	g.create(g.registrations, registration("provider-aws", controllerregistration.PolicyOnDemand, "Infrastructure", "aws", "ControlPlane", "aws", "Worker", "aws"))
	// Not needed without shoots: the seed's own provider is another one.
	g.consistently("no installation without a shoot", time.Second, func() bool { return len(g.installationsOf("seed-1")) == 0 })

	g.create(g.shoots, shoot("s1", "seed-1"))
	var ci *corev1beta1.ControllerInstallation
	g.eventually("an installation for the shoot's provider", func() bool {
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
	g.create(g.shoots, shoot("s2", "seed-1"))
	// The deployment changes: the installation's deployment hash follows, nothing else.
	g.update(g.deployments, "", "provider-aws", false, func(o store.Object) {
		o.(*corev1.ControllerDeployment).Helm.Values.Raw = []byte(`{"value":"b"}`)
	})
	g.eventually("the deployment hash to follow", func() bool {
		cur := g.installationsOf("seed-1")["provider-aws"]
		return cur.GetMetadata().GetLabels()[controllerregistration.LabelDeploymentHash] != labels[controllerregistration.LabelDeploymentHash]
	})
	if got := g.installationsOf("seed-1"); len(got) != 1 || got["provider-aws"].GetMetadata().GetName() != ci.GetMetadata().GetName() {
		t.Fatalf("installations after the update: %v", got)
	}

	// The agent reports the extension objects as still there: the installation stays after the shoots go.
	g.update(g.installations, "", ci.GetMetadata().GetName(), true, setRequired("True"))
	g.delete(g.shoots, "garden-dev", "s1")
	g.delete(g.shoots, "garden-dev", "s2")
	g.consistently("the installation while Required", time.Second, func() bool { return g.installationsOf("seed-1")["provider-aws"] != nil })
	// Once they are gone it goes too.
	g.update(g.installations, "", ci.GetMetadata().GetName(), true, setRequired("False"))
	g.eventually("the installation to go", func() bool { return len(g.installationsOf("seed-1")) == 0 })
}

func TestPolicies(t *testing.T) {
	g := newGarden(t)
	g.create(g.seeds, seed("seed-1", map[string]string{"env": "prod"}))
	g.create(g.seeds, seed("seed-2", map[string]string{"env": "dev"}))
	for _, n := range []string{"always", "except-no-shoots", "selected"} {
		g.create(g.deployments, deployment(n, "a"))
	}
	g.create(g.registrations, registration("always", controllerregistration.PolicyAlways, "Extension", "a"))
	g.create(g.registrations, registration("except-no-shoots", controllerregistration.PolicyAlwaysExceptNoShoots, "Extension", "b"))
	sel := registration("selected", controllerregistration.PolicyAlways, "Extension", "c")
	sel.Spec.Resources[0].Primary = proto.Bool(false)
	sel.Spec.Deployment.SeedSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	g.create(g.registrations, sel)

	names := func(seed string) []string {
		var out []string
		for n := range g.installationsOf(seed) {
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	g.eventually("Always everywhere, the selected one only on the selected seed", func() bool {
		return slices.Equal(names("seed-1"), []string{"always", "selected"}) && slices.Equal(names("seed-2"), []string{"always"})
	})
	g.create(g.shoots, shoot("s1", "seed-2"))
	g.eventually("AlwaysExceptNoShoots once the seed has a shoot", func() bool {
		return slices.Equal(names("seed-2"), []string{"always", "except-no-shoots"}) && slices.Equal(names("seed-1"), []string{"always", "selected"})
	})
	g.delete(g.shoots, "garden-dev", "s1")
	g.eventually("AlwaysExceptNoShoots gone with the last shoot", func() bool { return slices.Equal(names("seed-2"), []string{"always"}) })
	// The seed's labels change: the selected registration follows.
	g.update(g.seeds, "", "seed-2", false, func(o store.Object) { o.GetMetadata().Labels["env"] = "prod" })
	g.eventually("the selected registration on the relabelled seed", func() bool {
		return slices.Equal(names("seed-2"), []string{"always", "selected"})
	})
}

// TestFinalizers: a registration stays while installations use it, a deployment while registrations reference it,
// a seed while installations are deployed to it.
func TestFinalizers(t *testing.T) {
	g := newGarden(t)
	g.create(g.seeds, seed("seed-1", nil))
	g.create(g.deployments, deployment("ext", "a"))
	g.create(g.registrations, registration("ext", controllerregistration.PolicyAlways, "Extension", "e"))
	var ci *corev1beta1.ControllerInstallation
	g.eventually("the installation", func() bool { ci = g.installationsOf("seed-1")["ext"]; return ci != nil })
	hasFinalizer := func(c *store.Collection, name, f string) bool {
		obj, err := c.Get(context.Background(), "", name)
		return err == nil && slices.Contains(obj.GetMetadata().GetFinalizers(), f)
	}
	g.eventually("the finalizers", func() bool {
		return hasFinalizer(g.registrations, "ext", controllerregistration.FinalizerControllerRegistration) &&
			hasFinalizer(g.deployments, "ext", controllerregistration.FinalizerControllerDeployment) &&
			hasFinalizer(g.seeds, "seed-1", controllerregistration.FinalizerControllerRegistration)
	})
	// The agent's finalizer keeps the installation until it has uninstalled the controller.
	const agentFinalizer = "core.gardener.cloud/controllerinstallation"
	g.update(g.installations, "", ci.GetMetadata().GetName(), false, func(o store.Object) {
		o.GetMetadata().Finalizers = append(o.GetMetadata().Finalizers, agentFinalizer)
	})

	// Deleting the deployment waits for the registration; deleting the registration waits for the installation,
	// which the registration's deletion does not renew.
	g.delete(g.deployments, "", "ext")
	g.delete(g.registrations, "", "ext")
	g.consistently("the registration and the deployment while the installation is there", time.Second, func() bool {
		return g.exists(g.registrations, "ext") && g.exists(g.deployments, "ext")
	})
	// The Always registration is being deleted, so the seed no longer wants it: its installation is marked.
	g.eventually("the installation marked for deletion", func() bool {
		cur := g.installationsOf("seed-1")["ext"]
		return cur != nil && cur.GetMetadata().GetDeletionTimestamp() != nil
	})
	// The seed's deletion waits for the installation too.
	g.delete(g.seeds, "", "seed-1")
	g.consistently("the seed while the installation is there", 500*time.Millisecond, func() bool { return g.exists(g.seeds, "seed-1") })

	// The agent has uninstalled: everything goes, in order.
	g.update(g.installations, "", ci.GetMetadata().GetName(), false, func(o store.Object) {
		o.GetMetadata().Finalizers = slices.DeleteFunc(o.GetMetadata().Finalizers, func(f string) bool { return f == agentFinalizer })
	})
	g.eventually("the registration, the deployment and the seed to go", func() bool {
		return !g.exists(g.registrations, "ext") && !g.exists(g.deployments, "ext") && !g.exists(g.seeds, "seed-1")
	})
}
