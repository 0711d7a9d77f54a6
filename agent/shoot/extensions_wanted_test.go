package shoot

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// TestWantedExtensions: the shoot's listed types (unless disabled) and the auto-enabled ones, with the lifecycle and
// reconcileTimeout of their registrations and Gardener's defaults.
func TestWantedExtensions(t *testing.T) {
	op := &operation{
		shoot: &corev1beta1.Shoot{Spec: &corev1beta1.ShootSpec{Extensions: []*corev1beta1.Extension{
			{Type: "listed"}, {Type: "off", Disabled: proto.Bool(true)}, {Type: "auto-off", Disabled: proto.Bool(true)},
		}}},
		registrations: []*corev1beta1.ControllerRegistration{{Spec: &corev1beta1.ControllerRegistrationSpec{Resources: []*corev1beta1.ControllerResource{
			{Kind: "Extension", Type: "listed", ReconcileTimeout: proto.String("30s"),
				Lifecycle: &corev1beta1.ControllerResourceLifecycle{Reconcile: proto.String("BeforeKubeAPIServer")}},
			{Kind: "Extension", Type: "auto", AutoEnable: []string{"shoot"}},
			{Kind: "Extension", Type: "auto-off", AutoEnable: []string{"shoot"}},
			{Kind: "Infrastructure", Type: "listed"},
		}}}},
	}
	got := map[string]wantedExtension{}
	for _, w := range op.wantedExtensions() {
		got[w.typ] = w
	}
	if len(got) != 2 {
		t.Fatalf("wanted %v, want listed and auto", got)
	}
	if w := got["listed"]; w.reconcile != "BeforeKubeAPIServer" || w.delete != "BeforeKubeAPIServer" || w.timeout != 30*time.Second {
		t.Errorf("listed: %+v", w)
	}
	if w := got["auto"]; w.reconcile != "AfterKubeAPIServer" || w.migrate != "BeforeKubeAPIServer" || w.timeout != defaultExtensionTimeout {
		t.Errorf("auto: %+v", w)
	}
}
