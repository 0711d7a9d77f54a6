package admission_test

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/runtime/schema"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func validControllerRegistration() *corev1beta1.ControllerRegistration {
	return &corev1beta1.ControllerRegistration{
		Metadata: meta("provider-local", ""),
		Spec: &corev1beta1.ControllerRegistrationSpec{
			Resources: []*corev1beta1.ControllerResource{
				{Kind: "Infrastructure", Type: "local"},
				{Kind: "Extension", Type: "shoot-dns-service", AutoEnable: []string{"shoot"}},
			},
			Deployment: &corev1beta1.ControllerRegistrationDeployment{
				DeploymentRefs: []*corev1beta1.DeploymentRef{{Name: "provider-local"}},
			},
		},
	}
}

func TestControllerRegistrationValidation(t *testing.T) {
	cr := func(f func(*corev1beta1.ControllerRegistration)) *corev1beta1.ControllerRegistration {
		return with(validControllerRegistration(), f)
	}
	cases := []validationCase{
		{name: "valid", obj: validControllerRegistration()},
		{name: "example", obj: examplesOf(t, &corev1beta1.ControllerRegistration{})[0]},
		{name: "kind and type required", obj: cr(func(c *corev1beta1.ControllerRegistration) {
			c.Spec.Resources = append(c.Spec.Resources, &corev1beta1.ControllerResource{})
		}), paths: []string{"spec.resources[2].kind", "spec.resources[2].type"}},
		{name: "kind must be an extension kind", obj: cr(func(c *corev1beta1.ControllerRegistration) { c.Spec.Resources[0].Kind = "Shoot" }),
			paths: []string{"spec.resources[0].kind"}},
		{name: "kind/type unique", obj: cr(func(c *corev1beta1.ControllerRegistration) {
			c.Spec.Resources = append(c.Spec.Resources, &corev1beta1.ControllerResource{Kind: "Infrastructure", Type: "local"},
				&corev1beta1.ControllerResource{Kind: "Infrastructure", Type: "aws"})
		}), paths: []string{"spec.resources[2]"}},
		{name: "Extension-only fields", obj: cr(func(c *corev1beta1.ControllerRegistration) {
			c.Spec.Resources[0].AutoEnable = []string{"shoot"}
			c.Spec.Resources[0].ReconcileTimeout = ptr("1m")
			c.Spec.Resources[0].Lifecycle = &corev1beta1.ControllerResourceLifecycle{}
		}), paths: []string{"spec.resources[0].autoEnable", "spec.resources[0].lifecycle", "spec.resources[0].reconcileTimeout"}},
		{name: "extension cluster types and lifecycle", obj: cr(func(c *corev1beta1.ControllerRegistration) {
			r := c.Spec.Resources[1]
			r.ClusterCompatibility = []string{"shoot", "garden", "shoot"}
			r.AutoEnable = []string{"seed"}
			r.ReconcileTimeout = ptr("soon")
			r.Lifecycle = &corev1beta1.ControllerResourceLifecycle{Reconcile: ptr("AfterWorker"), Delete: ptr("AfterWorker")}
		}), paths: []string{
			"spec.resources[1].autoEnable[0]",
			"spec.resources[1].clusterCompatibility[1]", "spec.resources[1].clusterCompatibility[2]",
			"spec.resources[1].lifecycle.delete",
			"spec.resources[1].reconcileTimeout",
		}},
		{name: "deployment policy", obj: cr(func(c *corev1beta1.ControllerRegistration) { c.Spec.Deployment.Policy = ptr("Sometimes") }),
			paths: []string{"spec.deployment.policy"}},
		{name: "seed selector only without primary resources", obj: cr(func(c *corev1beta1.ControllerRegistration) {
			c.Spec.Deployment.SeedSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}), paths: []string{"spec.deployment.seedSelector"}},
		{name: "seed selector for a secondary controller", obj: cr(func(c *corev1beta1.ControllerRegistration) {
			for _, r := range c.Spec.Resources {
				r.Primary = ptr(false)
			}
			c.Spec.Deployment.SeedSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		})},
		{name: "one deployment ref with a name", obj: cr(func(c *corev1beta1.ControllerRegistration) {
			c.Spec.Deployment.DeploymentRefs = append(c.Spec.Deployment.DeploymentRefs, &corev1beta1.DeploymentRef{})
		}), paths: []string{"spec.deployment.deploymentRefs", "spec.deployment.deploymentRefs[1].name"}},
		{name: "primary is immutable", old: validControllerRegistration(), obj: cr(func(c *corev1beta1.ControllerRegistration) {
			c.Spec.Resources[0].Primary = ptr(false)
		}), paths: []string{"spec.resources[0].primary"}},
		{name: "new resources may be added", old: validControllerRegistration(), obj: cr(func(c *corev1beta1.ControllerRegistration) {
			c.Spec.Resources = append(c.Spec.Resources, &corev1beta1.ControllerResource{Kind: "Worker", Type: "local", Primary: ptr(false)})
		})},
		{name: "no spec changes while deleting", old: validControllerRegistration(), obj: cr(func(c *corev1beta1.ControllerRegistration) {
			c.Metadata.DeletionTimestamp = timestamppb.Now()
			c.Spec.Resources = c.Spec.Resources[:1]
		}), paths: []string{"spec"}},
	}
	runCases(t, cases)
}

func TestControllerRegistrationDefaults(t *testing.T) {
	c := validControllerRegistration()
	if errs := validate(t, c, nil); len(errs) > 0 {
		t.Fatal(errs)
	}
	infra, ext := c.Spec.Resources[0], c.Spec.Resources[1]
	switch {
	case !infra.GetPrimary() || !ext.GetPrimary():
		t.Errorf("primary not defaulted to true")
	case infra.Lifecycle != nil || infra.ReconcileTimeout != nil:
		t.Errorf("non-Extension resource got Extension defaults: %v", infra)
	case ext.GetReconcileTimeout() != "3m0s" || len(ext.ClusterCompatibility) != 1 || ext.ClusterCompatibility[0] != "shoot":
		t.Errorf("Extension defaults missing: %v", ext)
	case ext.GetLifecycle().GetReconcile() != "AfterKubeAPIServer" || ext.GetLifecycle().GetDelete() != "BeforeKubeAPIServer" || ext.GetLifecycle().GetMigrate() != "BeforeKubeAPIServer":
		t.Errorf("lifecycle defaults missing: %v", ext.GetLifecycle())
	case c.Spec.Deployment.GetPolicy() != "OnDemand":
		t.Errorf("policy = %q, want OnDemand", c.Spec.Deployment.GetPolicy())
	}
}

// TestControllerRegistrationOnePrimary: a kind/type is controlled primarily by one registration only; secondaries and
// the registration itself (an update) do not count.
func TestControllerRegistrationOnePrimary(t *testing.T) {
	crGR := schema.GroupResource{Group: "core.gardener.cloud", Resource: "controllerregistrations"}
	existing := func(name string, primary *bool) example {
		return example{name: name, gr: crGR, obj: &corev1beta1.ControllerRegistration{Metadata: meta(name, ""),
			Spec: &corev1beta1.ControllerRegistrationSpec{Resources: []*corev1beta1.ControllerResource{{Kind: "Infrastructure", Type: "local", Primary: primary}}}}}
	}
	for _, tc := range []struct {
		name   string
		reader exampleReader
		obj    *corev1beta1.ControllerRegistration
		paths  []string
	}{
		{name: "another primary (defaulted)", reader: exampleReader{existing("other", nil)}, obj: validControllerRegistration(),
			paths: []string{"spec.resources[0].primary"}},
		{name: "another explicit primary", reader: exampleReader{existing("other", proto.Bool(true))}, obj: validControllerRegistration(),
			paths: []string{"spec.resources[0].primary"}},
		{name: "another secondary", reader: exampleReader{existing("other", proto.Bool(false))}, obj: validControllerRegistration()},
		{name: "itself", reader: exampleReader{existing("provider-local", nil)}, obj: validControllerRegistration()},
		{name: "this one secondary", reader: exampleReader{existing("other", nil)}, obj: with(validControllerRegistration(), func(c *corev1beta1.ControllerRegistration) {
			c.Spec.Resources[0].Primary = proto.Bool(false)
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := validateWith(t, tc.reader, tc.obj, nil)
			if got := errorPaths(errs); !slices.Equal(got, tc.paths) {
				t.Errorf("error paths %q, want %q (errors: %v)", got, tc.paths, errs)
			}
		})
	}
}
