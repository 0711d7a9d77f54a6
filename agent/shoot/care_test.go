package shoot

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/trellis-dev/trellis/agent/controller"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// TestShootConditionsKeepOtherWriters: the conditions the agent writes are the shoot's own, followed by the other
// writers' as they are (the Seed conditions the hub copies into a shoot that a ManagedSeed registers), so that a
// care run whose own conditions did not change writes nothing and the shoot's health never loses the seed's.
func TestShootConditionsKeepOtherWriters(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := extensionsv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := appsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 19, 0, 0, 0, time.UTC)
	c := &Controller{cfg: Config{Base: controller.Base{Seed: fake.NewClientBuilder().WithScheme(scheme).Build(), Now: func() time.Time { return now }}}}
	seedCond := &metav1.Condition{Type: "GardenletReady", Status: "True", Reason: "GardenletReady", Message: "Gardenlet is posting ready status."}
	s := &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: "soil"}, Spec: &corev1beta1.ShootSpec{},
		Status: &corev1beta1.ShootStatus{Conditions: []*metav1.Condition{{Type: extensionsv1alpha1.ShootControlPlaneHealthy, Status: "True"}, seedCond}}}
	raw, err := c.shootConditions(context.Background(), s, "shoot--garden--soil")
	if err != nil {
		t.Fatal(err)
	}
	var got []struct{ Type, Status, Reason, Message string }
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, g := range got {
		types = append(types, g.Type)
	}
	want := []string{"APIServerAvailable", "ControlPlaneHealthy", "ObservabilityComponentsHealthy", "SystemComponentsHealthy", "GardenletReady"}
	if !slices.Equal(types, want) {
		t.Fatalf("condition types %v, want %v (the workerless shoot's own, then the seed's)", types, want)
	}
	if last := got[len(got)-1]; last.Status != seedCond.Status || last.Reason != seedCond.Reason || last.Message != seedCond.Message {
		t.Errorf("the seed's condition changed: %+v", last)
	}
}
