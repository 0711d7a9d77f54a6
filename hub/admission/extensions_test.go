package admission_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trellis-dev/trellis/hub/admission"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// TestShootExtensionsRegistered: with RequireRegisteredExtensions a shoot's provider, networking, primary DNS,
// extension, container runtime and operating system types must be registered as primary by a ControllerRegistration,
// each refusal naming its field in Gardener's words; an update that leaves the spec alone and a hub without the option
// are not checked.
var controllerRegistrationsGR = schema.GroupResource{Group: "core.gardener.cloud", Resource: "controllerregistrations"}

func TestShootExtensionsRegistered(t *testing.T) {
	r, base := shootGarden(t)
	base = with(base, func(s *corev1beta1.Shoot) {
		s.Spec.Networking.Type = ptr("calico")
		s.Spec.Extensions = []*corev1beta1.Extension{{Type: "shoot-dns-service"}}
		s.Spec.Provider.Workers[0].Cri = &corev1beta1.CRI{Name: "containerd", ContainerRuntimes: []*corev1beta1.ContainerRuntime{{Type: "gvisor"}}}
		s.Spec.Dns = &corev1beta1.DNS{Providers: []*corev1beta1.DNSProvider{{Type: ptr("aws-route53"), Primary: ptr(true)}, {Type: ptr("unmanaged"), Primary: ptr(true)}}}
	})
	provider := base.GetSpec().GetProvider().GetType()
	image := base.GetSpec().GetProvider().GetWorkers()[0].GetMachine().GetImage().GetName()
	if provider == "" || image == "" {
		t.Fatalf("the example shoot has no provider type or machine image: %v", base.GetSpec().GetProvider())
	}
	res := func(kind, typ string) *corev1beta1.ControllerResource {
		return &corev1beta1.ControllerResource{Kind: kind, Type: typ}
	}
	all := []*corev1beta1.ControllerResource{res("ControlPlane", provider), res("Infrastructure", provider), res("Worker", provider),
		res("Network", "calico"), res("DNSRecord", "aws-route53"), res("Extension", "shoot-dns-service"), res("ContainerRuntime", "gvisor"),
		res("OperatingSystemConfig", image)}
	registered := func(resources ...*corev1beta1.ControllerResource) admission.Reader {
		// Only this registration: the examples' own are left out.
		others := slices.DeleteFunc(slices.Clone(r), func(e example) bool { return e.gr == controllerRegistrationsGR })
		reg := &corev1beta1.ControllerRegistration{Metadata: meta("ext", ""), Spec: &corev1beta1.ControllerRegistrationSpec{Resources: resources}}
		return replaced(others, controllerRegistrationsGR, reg)
	}
	admit := func(rd admission.Reader, require bool, obj, old *corev1beta1.Shoot) map[string]string {
		t.Helper()
		ctx := admission.WithConfig(context.Background(), admission.Config{RequireRegisteredExtensions: require})
		p := plugins.For(obj)
		p.Default(obj)
		var errs field.ErrorList
		if old == nil {
			errs = p.Validate(ctx, rd, obj, nil)
		} else {
			p.Default(old)
			errs = p.Validate(ctx, rd, obj, old)
		}
		got := map[string]string{}
		for _, e := range errs {
			if e.Type == field.ErrorTypeForbidden && strings.HasPrefix(e.Detail, "given Shoot") {
				got[e.Field] = e.Detail
			}
		}
		return got
	}
	if got := admit(registered(all...), true, clone(base), nil); len(got) != 0 {
		t.Errorf("everything registered: %v", got)
	}
	got := admit(registered(), true, clone(base), nil)
	want := map[string]string{
		"spec.provider.type":                                     `given Shoot uses non-registered provider type: spec.provider.type ("` + provider + `")`,
		"spec.networking.type":                                   `given Shoot uses non-registered networking type: spec.networking.type ("calico")`,
		"spec.dns.providers[0].type":                             `given Shoot uses non-registered extension type: spec.dns.providers[0].type ("aws-route53")`,
		"spec.extensions[0].type":                                `given Shoot uses non-registered extension type: spec.extensions[0].type ("shoot-dns-service")`,
		"spec.provider.workers[0].cri.containerRuntimes[0].type": `given Shoot uses non-registered container runtime type: spec.provider.workers[0].cri.containerRuntimes[0].type ("gvisor")`,
		"spec.provider.workers[0].machine.image.name":            `given Shoot uses non-registered operating system type: spec.provider.workers[0].machine.image.name ("` + image + `")`,
	}
	for f, msg := range want {
		if got[f] != msg {
			t.Errorf("nothing registered: %s: want %q, got %q", f, msg, got[f])
		}
	}
	if len(got) != len(want) {
		t.Errorf("nothing registered: got %v", got)
	}
	// A resource registered with primary: false does not count.
	notPrimary := append([]*corev1beta1.ControllerResource{}, all[:len(all)-1]...)
	osc := res("OperatingSystemConfig", image)
	osc.Primary = ptr(false)
	if got := admit(registered(append(notPrimary, osc)...), true, clone(base), nil); len(got) != 1 || got["spec.provider.workers[0].machine.image.name"] == "" {
		t.Errorf("operating system registered as not primary: %v", got)
	}
	// An update leaving the spec as it was, and a hub without the option, are not checked.
	if got := admit(registered(), true, clone(base), clone(base)); len(got) != 0 {
		t.Errorf("unchanged spec: %v", got)
	}
	if got := admit(registered(), false, clone(base), nil); len(got) != 0 {
		t.Errorf("without RequireRegisteredExtensions: %v", got)
	}
}
