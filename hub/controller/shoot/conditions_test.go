package shoot

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

func cond(typ, status string) *metav1.Condition { return &metav1.Condition{Type: typ, Status: status} }

func types(cs []*metav1.Condition) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.GetType()+"="+c.GetStatus())
	}
	return out
}

func TestMergeSeedConditions(t *testing.T) {
	seed := &corev1beta1.Seed{Status: &corev1beta1.SeedStatus{Conditions: []*metav1.Condition{
		cond("GardenletReady", "True"), cond("ExtensionsReady", "False")}}}
	for _, tc := range []struct {
		name  string
		shoot []*metav1.Condition
		seed  *corev1beta1.Seed
		want  []string
	}{
		{"seed conditions appended", []*metav1.Condition{cond("APIServerAvailable", "True")}, seed,
			[]string{"APIServerAvailable=True", "GardenletReady=True", "ExtensionsReady=False"}},
		{"old seed conditions replaced", []*metav1.Condition{cond("GardenletReady", "Unknown"), cond("EveryNodeReady", "True"),
			cond("BackupBucketsReady", "True")}, seed, []string{"EveryNodeReady=True", "GardenletReady=True", "ExtensionsReady=False"}},
		{"no seed: seed conditions removed", []*metav1.Condition{cond("GardenletReady", "True"), cond("ControlPlaneHealthy", "False")}, nil,
			[]string{"ControlPlaneHealthy=False"}},
		{"a seed condition of a shoot type wins", []*metav1.Condition{cond("SystemComponentsHealthy", "True")},
			&corev1beta1.Seed{Status: &corev1beta1.SeedStatus{Conditions: []*metav1.Condition{cond("SystemComponentsHealthy", "False")}}},
			[]string{"SystemComponentsHealthy=False"}},
	} {
		if got := types(mergeSeedConditions(tc.shoot, tc.seed)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestConditionsReconcile: a shoot registered as a seed carries its seed's conditions; when the ManagedSeed goes,
// they go.
func TestConditionsReconcile(t *testing.T) {
	e := newEnv(t, time.Now())
	r := &conditionsReconciler{c: e.c, log: testLog()}
	// ManagedSeeds live in garden, and so do the shoots they register.
	shoot := newShoot("s", func(s *corev1beta1.Shoot) {
		s.Metadata.Namespace = "garden"
		s.Status = &corev1beta1.ShootStatus{Conditions: []*metav1.Condition{cond("APIServerAvailable", "True")}}
	})
	e.createShoot(shoot)
	k := key(shoot)
	controllertest.Create(e.t, e.c.managedSeeds, &seedmanagementv1alpha1.ManagedSeed{Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: "seed-s"},
		Spec: &seedmanagementv1alpha1.ManagedSeedSpec{Shoot: &seedmanagementv1alpha1.Shoot{Name: "s"}}})
	if got := r.shootsOfSeed(&corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: "seed-s"}}); len(got) != 1 || got[0] != k {
		t.Fatalf("shoots of seed-s: %v", got)
	}
	if got := r.shootsOfSeed(&corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: "unmanaged"}}); len(got) != 0 {
		t.Fatalf("shoots of an unmanaged seed: %v", got)
	}
	get := func() []string {
		obj, err := e.c.shoots.Get(t.Context(), "garden", "s")
		if err != nil {
			t.Fatal(err)
		}
		return types(obj.(*corev1beta1.Shoot).GetStatus().GetConditions())
	}
	if _, err := r.Reconcile(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	// The ManagedSeed is there, its Seed is not registered yet: nothing to copy.
	if got := get(); !slices.Equal(got, []string{"APIServerAvailable=True"}) {
		t.Fatalf("conditions %v before the seed exists", got)
	}
	seed := controllertest.Create(e.t, e.c.seeds, &corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: "seed-s"}})
	seed.Status = &corev1beta1.SeedStatus{Conditions: []*metav1.Condition{cond("GardenletReady", "True"), cond("BackupBucketsReady", "True")}}
	if _, err := e.c.seeds.UpdateStatus(t.Context(), seed); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	if got := get(); !slices.Equal(got, []string{"APIServerAvailable=True", "GardenletReady=True", "BackupBucketsReady=True"}) {
		t.Fatalf("conditions %v with the seed", got)
	}
	obj, _ := e.c.shoots.Get(t.Context(), "garden", "s")
	rv := obj.GetMetadata().GetResourceVersion()
	if _, err := r.Reconcile(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	if obj, _ := e.c.shoots.Get(t.Context(), "garden", "s"); obj.GetMetadata().GetResourceVersion() != rv {
		t.Fatal("unchanged conditions were written")
	}
	// A second ManagedSeed for the same shoot is an error, not a guess.
	dup := controllertest.Create(e.t, e.c.managedSeeds, &seedmanagementv1alpha1.ManagedSeed{Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: "seed-dup"},
		Spec: &seedmanagementv1alpha1.ManagedSeedSpec{Shoot: &seedmanagementv1alpha1.Shoot{Name: "s"}}})
	if _, err := r.Reconcile(t.Context(), k); err == nil {
		t.Fatal("two ManagedSeeds for one shoot: no error")
	}
	for _, name := range []string{dup.GetMetadata().GetName(), "seed-s"} {
		if _, _, err := e.c.managedSeeds.Delete(t.Context(), "garden", name, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Reconcile(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	if got := get(); !slices.Equal(got, []string{"APIServerAvailable=True"}) {
		t.Fatalf("conditions %v after the ManagedSeed went", got)
	}
	if d := seedConditionsDigest(seed); d != seedConditionsDigest(withUpdateTime(seed)) {
		t.Fatal("the seed digest changes with lastUpdateTime alone")
	}
}

func withUpdateTime(s *corev1beta1.Seed) *corev1beta1.Seed {
	s = proto.CloneOf(s)
	for _, c := range s.GetStatus().GetConditions() {
		c.LastUpdateTime = timestamppb.Now()
	}
	return s
}
