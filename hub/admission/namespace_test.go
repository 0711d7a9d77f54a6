package admission_test

import (
	"testing"

	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
)

func TestNamespaceValidation(t *testing.T) {
	ns := func(name string, finalizers ...string) *kcorev1.Namespace {
		return &kcorev1.Namespace{Metadata: meta(name, ""), Spec: &kcorev1.NamespaceSpec{Finalizers: finalizers}}
	}
	runCases(t, []validationCase{
		{name: "valid", obj: ns("garden-dev", "kubernetes", "example.com/cleanup")},
		{name: "example", obj: examplesOf(t, &kcorev1.Namespace{})[0]},
		{name: "name is a DNS label", obj: ns("garden.dev"), paths: []string{"metadata.name"}},
		{name: "finalizers", obj: ns("garden-dev", "cleanup", "bad name/x"), paths: []string{"spec.finalizers[0]", "spec.finalizers[1]"}},
	})
}

func TestNamespaceDefaults(t *testing.T) {
	n := &kcorev1.Namespace{Metadata: meta("garden-dev", "")}
	if errs := validate(t, n, nil); len(errs) > 0 {
		t.Fatal(errs)
	}
	if n.GetStatus().GetPhase() != "Active" {
		t.Errorf("status.phase = %q, want Active", n.GetStatus().GetPhase())
	}
}
