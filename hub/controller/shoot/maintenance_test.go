package shoot

import (
	"context"
	"github.com/trellis-dev/trellis/hub/admission"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

// profileSpec is a cloud profile of type local with machine type m1 and image gardenlinux (strategy patch) with the
// given versions (see ev for their notation).
func profileSpec(kubernetes, images []string) *corev1beta1.CloudProfileSpec {
	var ivs []*corev1beta1.MachineImageVersion
	for _, v := range evs(images...) {
		ivs = append(ivs, &corev1beta1.MachineImageVersion{Version: v.Version, ExpirationDate: v.ExpirationDate, Classification: v.Classification})
	}
	return &corev1beta1.CloudProfileSpec{Type: "local",
		Kubernetes:    &corev1beta1.KubernetesSettings{Versions: evs(kubernetes...)},
		MachineTypes:  []*corev1beta1.MachineType{{Name: "m1"}},
		MachineImages: []*corev1beta1.MachineImage{{Name: "gardenlinux", UpdateStrategy: ptr("patch"), Versions: ivs}},
	}
}

// newMaintenanceEnv is a garden with a Project for garden-dev (the API's validation wants one), the cloud profile
// "local" and a ControllerRegistration of the shoots' extension types (admission wants them registered), and a
// maintenance reconciler on a fake clock whose random choices are the earliest possible.
func newMaintenanceEnv(t *testing.T, now time.Time, profile *corev1beta1.CloudProfileSpec) *env {
	e := newEnv(t, now)
	projects := controllertest.Collection(t, e.reg, "core.gardener.cloud", "projects")
	controllertest.Create(e.t, projects, &corev1beta1.Project{Metadata: &metav1.ObjectMeta{Name: "dev"}, Spec: &corev1beta1.ProjectSpec{Namespace: ptr("garden-dev")}})
	controllertest.Create(e.t, controllertest.Collection(t, e.reg, "core.gardener.cloud", "controllerregistrations"), &corev1beta1.ControllerRegistration{
		Metadata: &metav1.ObjectMeta{Name: "provider-local"}, Spec: &corev1beta1.ControllerRegistrationSpec{Resources: []*corev1beta1.ControllerResource{
			{Kind: "ControlPlane", Type: "local"}, {Kind: "Infrastructure", Type: "local"}, {Kind: "Worker", Type: "local"},
			{Kind: "Network", Type: "calico"}, {Kind: "OperatingSystemConfig", Type: "gardenlinux"},
		}}})
	controllertest.Create(e.t, e.c.cloudProfiles, &corev1beta1.CloudProfile{Metadata: &metav1.ObjectMeta{Name: "local"}, Spec: profile})
	return e
}

func (e *env) maintenance(cfg MaintenanceConfig) *maintenanceReconciler {
	cfg.Admission = admission.Builtin()
	return newMaintenanceReconciler(e.c, cfg, e.clock, func(int64) int64 { return 0 }, e.recorder(), testLog())
}

func (e *env) setProfile(profile *corev1beta1.CloudProfileSpec) {
	e.t.Helper()
	obj, err := e.c.cloudProfiles.Get(e.t.Context(), "", "local")
	if err != nil {
		e.t.Fatal(err)
	}
	cp := proto.CloneOf(obj.(*corev1beta1.CloudProfile))
	cp.Spec = profile
	if _, err := e.c.cloudProfiles.Update(e.t.Context(), cp); err != nil {
		e.t.Fatal(err)
	}
}

// maintainedShoot is a shoot with window 22:00-23:00 UTC, Kubernetes 1.30.1, a pool on gardenlinux 1.0.0, reconciled
// successfully once.
func maintainedShoot(name string, mutate ...func(*corev1beta1.Shoot)) *corev1beta1.Shoot {
	return newShoot(name, append([]func(*corev1beta1.Shoot){func(s *corev1beta1.Shoot) {
		s.Spec.CloudProfile = &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: "local"}
		s.Spec.Maintenance = &corev1beta1.Maintenance{TimeWindow: &corev1beta1.MaintenanceTimeWindow{Begin: "220000+0000", End: "230000+0000"}}
		s.Spec.Provider.Workers = []*corev1beta1.Worker{{Name: "pool", Machine: &corev1beta1.Machine{Type: "m1",
			Image: &corev1beta1.ShootMachineImage{Name: "gardenlinux", Version: ptr("1.0.0")}}}}
		s.Status = &corev1beta1.ShootStatus{ObservedGeneration: ptr(int64(1)),
			LastOperation: &metav1.LastOperation{Type: "Reconcile", State: "Succeeded", LastUpdateTime: timestamppb.Now()}}
	}}, mutate...)...)
}

func noAutoUpdate(s *corev1beta1.Shoot) {
	s.Spec.Maintenance.AutoUpdate = &corev1beta1.MaintenanceAutoUpdate{KubernetesVersion: ptr(false), MachineImageVersion: ptr(false)}
}

func versions(s *corev1beta1.Shoot) (kubernetes, image string) {
	return s.GetSpec().GetKubernetes().GetVersion(), s.GetSpec().GetProvider().GetWorkers()[0].GetMachine().GetImage().GetVersion()
}

// TestMaintenanceWindow: outside its window a shoot is never updated, even with updates available; inside it, it is
// maintained once per occurrence of the window (at the moment chosen, here the earliest), with its versions updated,
// lastMaintenance and the reconcile operation; the agent's changes meanwhile do not make it maintained again.
func TestMaintenanceWindow(t *testing.T) {
	noon := time.Date(2030, 6, 3, 12, 0, 0, 0, time.UTC)
	e := newMaintenanceEnv(t, noon, profileSpec([]string{"1.30.1", "1.30.5", "1.31.0"}, []string{"1.0.0", "1.0.2", "1.1.0"}))
	r := e.maintenance(MaintenanceConfig{RestartControlPlane: true})
	e.createShoot(maintainedShoot("s"))
	before := e.shoot("s")

	res := reconcile(t, r, "s")
	if after := e.shoot("s"); after.GetMetadata().GetResourceVersion() != before.GetMetadata().GetResourceVersion() {
		t.Fatal("the shoot was updated outside its maintenance window")
	}
	if res.RequeueAfter != 10*time.Hour {
		t.Fatalf("next look after %v, want 10h (22:00)", res.RequeueAfter)
	}
	// Something else enqueues the shoot at 21:59: still outside, still not updated.
	e.clock.SetTime(noon.Add(10*time.Hour - time.Minute))
	if res := reconcile(t, r, "s"); res.RequeueAfter != time.Minute {
		t.Fatalf("next look after %v, want 1m", res.RequeueAfter)
	}
	if after := e.shoot("s"); after.GetMetadata().GetResourceVersion() != before.GetMetadata().GetResourceVersion() {
		t.Fatal("the shoot was updated outside its maintenance window")
	}

	e.clock.SetTime(noon.Add(10 * time.Hour))
	res = reconcile(t, r, "s")
	s := e.shoot("s")
	if k, img := versions(s); k != "1.30.5" || img != "1.0.2" {
		t.Fatalf("versions %s, %s after the maintenance; want 1.30.5, 1.0.2", k, img)
	}
	if s.GetMetadata().GetGeneration() != 2 {
		t.Fatalf("generation %d, want 2", s.GetMetadata().GetGeneration())
	}
	ann := s.GetMetadata().GetAnnotations()
	if ann[AnnotationOperation] != OperationReconcile {
		t.Fatalf("operation %q, want reconcile", ann[AnnotationOperation])
	}
	if want := "deployInfrastructure,deployDNSRecordInternal,deployDNSRecordExternal,deployDNSRecordIngress,restartControlPlanePods"; ann[AnnotationTasks] != want {
		t.Fatalf("tasks %q, want %q", ann[AnnotationTasks], want)
	}
	lm := s.GetStatus().GetLastMaintenance()
	wantDescription := `All maintenance operations successful. Control Plane: Updated Kubernetes version from "1.30.1" to "1.30.5". Reason: Automatic update of Kubernetes version configured, Worker pool "pool": Updated machine image "gardenlinux" from "1.0.0" to "1.0.2". Reason: Automatic update of the machine image version is configured (image update strategy: patch)`
	if lm.GetState() != "Succeeded" || lm.GetDescription() != wantDescription || !lm.GetTriggeredTime().AsTime().Equal(e.clock.Now()) || lm.FailureReason != nil {
		t.Fatalf("lastMaintenance %v", lm)
	}
	if res.RequeueAfter != 24*time.Hour {
		t.Fatalf("next maintenance after %v, want tomorrow's window", res.RequeueAfter)
	}
	events := strings.Join(e.events(), "\n")
	for _, want := range []string{EventKubernetesVersionMaintenance + `: Control Plane: Updated Kubernetes version from "1.30.1" to "1.30.5"`,
		EventMachineImageVersionMaintenance + `: Worker pool "pool": Updated machine image`} {
		if !strings.Contains(events, want) {
			t.Fatalf("events %s lack %q", events, want)
		}
	}

	// The agent picks the operation up and reconciles; a new patch appears. Within this window nothing more happens.
	e.updateShoot("s", false, func(s *corev1beta1.Shoot) { delete(s.Metadata.Annotations, AnnotationOperation) })
	e.setProfile(profileSpec([]string{"1.30.1", "1.30.5", "1.30.6", "1.31.0"}, []string{"1.0.0", "1.0.2", "1.1.0"}))
	e.clock.Step(10 * time.Minute)
	rv := e.shoot("s").GetMetadata().GetResourceVersion()
	reconcile(t, r, "s")
	if e.shoot("s").GetMetadata().GetResourceVersion() != rv {
		t.Fatal("maintained twice in one window")
	}
	// The next day at noon: outside the window, not updated.
	e.clock.SetTime(noon.Add(24 * time.Hour))
	reconcile(t, r, "s")
	if e.shoot("s").GetMetadata().GetResourceVersion() != rv {
		t.Fatal("the shoot was updated outside its maintenance window")
	}
	// Its window: the new patch.
	e.clock.SetTime(noon.Add(34 * time.Hour))
	reconcile(t, r, "s")
	if k, _ := versions(e.shoot("s")); k != "1.30.6" {
		t.Fatalf("Kubernetes %s in the next window, want 1.30.6", k)
	}
}

// TestMaintainOperation: gardener.cloud/operation=maintain maintains at once, outside the window, and goes.
func TestMaintainOperationAnnotation(t *testing.T) {
	noon := time.Date(2030, 6, 3, 12, 0, 0, 0, time.UTC)
	e := newMaintenanceEnv(t, noon, profileSpec([]string{"1.30.1", "1.30.5"}, []string{"1.0.0"}))
	r := e.maintenance(MaintenanceConfig{})
	e.createShoot(maintainedShoot("s", func(s *corev1beta1.Shoot) {
		s.Metadata.Annotations = map[string]string{AnnotationOperation: OperationMaintain,
			AnnotationMaintenanceOperation: "rotate-credentials-start"}
	}))
	reconcile(t, r, "s")
	s := e.shoot("s")
	if k, _ := versions(s); k != "1.30.5" {
		t.Fatalf("Kubernetes %s, want 1.30.5", k)
	}
	ann := s.GetMetadata().GetAnnotations()
	if ann[AnnotationOperation] != "rotate-credentials-start;reconcile" || ann[AnnotationMaintenanceOperation] != "" {
		t.Fatalf("annotations %v: want the maintenance operations and reconcile as the operation", ann)
	}
	if want := `Added "rotate-credentials-start;reconcile" operation annotation`; !strings.HasSuffix(s.GetStatus().GetLastMaintenance().GetDescription(), want) {
		t.Fatalf("description %q lacks %q", s.GetStatus().GetLastMaintenance().GetDescription(), want)
	}
}

// TestMaintenanceForcesExpiredVersions: without autoUpdate, only expired versions change, to the next minor for
// Kubernetes (worker pools never above the control plane) and to a supported image version.
func TestMaintenanceForcesExpiredVersions(t *testing.T) {
	at := time.Date(2030, 6, 3, 22, 0, 0, 0, time.UTC)
	profile := profileSpec([]string{"1.29.3", "1.30.5", "1.31.0", "1.31.2"}, []string{"1.0.0", "1.0.2", "1.1.0"})
	e := newMaintenanceEnv(t, at, profile)
	r := e.maintenance(MaintenanceConfig{})
	expired := func(v *corev1beta1.ExpirableVersion) { v.ExpirationDate = timestamppb.New(at.Add(-time.Hour)) }
	profile = profileSpec([]string{"1.30.5", "1.31.0", "1.31.2"}, []string{"1.0.0", "1.0.2", "1.1.0"})
	expired(profile.Kubernetes.Versions[0])
	profile.MachineImages[0].Versions[0].ExpirationDate = timestamppb.New(at.Add(-time.Hour))
	profile.MachineImages[0].Versions[1].ExpirationDate = timestamppb.New(at.Add(-time.Hour))
	e.setProfile(profile)
	e.createShoot(maintainedShoot("s", noAutoUpdate, func(s *corev1beta1.Shoot) {
		s.Spec.Kubernetes.Version = "1.30.5"
		s.Spec.Provider.Workers = append(s.Spec.Provider.Workers, &corev1beta1.Worker{Name: "old", Machine: &corev1beta1.Machine{Type: "m1"},
			Kubernetes: &corev1beta1.WorkerKubernetes{Version: ptr("1.30.5")}})
	}))
	reconcile(t, r, "s")
	s := e.shoot("s")
	if k, img := versions(s); k != "1.31.2" || img != "1.1.0" {
		t.Fatalf("versions %s, %s; want the expired ones forced to 1.31.2 and 1.1.0", k, img)
	}
	if v := s.GetSpec().GetProvider().GetWorkers()[1].GetKubernetes().GetVersion(); v != "1.31.2" {
		t.Fatalf("worker pool Kubernetes %s, want 1.31.2", v)
	}
	if d := s.GetStatus().GetLastMaintenance().GetDescription(); !strings.Contains(d, "Kubernetes version expired - force update required") ||
		!strings.Contains(d, "Machine image version expired - force update required (image update strategy: patch)") {
		t.Fatalf("description %q", d)
	}
}

// TestMaintenanceFailures: a version that cannot be forced is reported as a failed maintenance of that part while
// the rest goes ahead; a maintained spec the API would refuse is not written, and the maintain operation goes.
func TestMaintenanceFailures(t *testing.T) {
	at := time.Date(2030, 6, 3, 22, 0, 0, 0, time.UTC)
	profile := profileSpec([]string{"1.30.5:expired", "1.32.0"}, []string{"1.0.0", "1.0.2"})
	e := newMaintenanceEnv(t, at, profile)
	r := e.maintenance(MaintenanceConfig{})
	e.createShoot(maintainedShoot("s", func(s *corev1beta1.Shoot) { s.Spec.Kubernetes.Version = "1.30.5" }))
	reconcile(t, r, "s")
	s := e.shoot("s")
	if k, img := versions(s); k != "1.30.5" || img != "1.0.2" {
		t.Fatalf("versions %s, %s; want Kubernetes kept, the image updated", k, img)
	}
	lm := s.GetStatus().GetLastMaintenance()
	if lm.GetState() != "Failed" || !strings.HasPrefix(lm.GetDescription(), "(1/2) maintenance operations successful.") ||
		!strings.Contains(lm.GetFailureReason(), `Control Plane: Kubernetes maintenance failure due to: could not determine higher suitable version than "1.30.5"`) {
		t.Fatalf("lastMaintenance %v", lm)
	}

	// The API refuses the maintained spec (here: the credentials binding the shoot names was deleted; a machine type
	// that left the profile would not do, as the API, like Gardener's, lets a pool keep its machine type).
	profile = profileSpec([]string{"1.30.1", "1.30.5"}, []string{"1.0.0"})
	e.setProfile(profile)
	e.createShoot(maintainedShoot("refused", func(s *corev1beta1.Shoot) {
		s.Metadata.Annotations = map[string]string{AnnotationOperation: OperationMaintain}
		s.Spec.CredentialsBindingName = ptr("deleted-binding")
	}))
	before := e.shoot("refused")
	reconcile(t, r, "refused")
	after := e.shoot("refused")
	if after.GetMetadata().GetGeneration() != before.GetMetadata().GetGeneration() {
		t.Fatal("a refused maintenance changed the spec")
	}
	if _, ok := after.GetMetadata().GetAnnotations()[AnnotationOperation]; ok {
		t.Fatal("the maintain operation stayed after a refused maintenance")
	}
	lm = after.GetStatus().GetLastMaintenance()
	if lm.GetState() != "Failed" || lm.GetDescription() != "Maintenance failed" ||
		!strings.HasPrefix(lm.GetFailureReason(), "Updates to the Shoot failed to be applied: ") || !strings.Contains(lm.GetFailureReason(), "deleted-binding") {
		t.Fatalf("lastMaintenance %v", lm)
	}

	// Fixed meanwhile: the next maintenance with nothing to update clears the failure.
	controllertest.Create(e.t, e.c.credentialsBindings, &securityv1alpha1.CredentialsBinding{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "deleted-binding"}})
	e.updateShoot("refused", false, func(s *corev1beta1.Shoot) { s.Spec.Kubernetes.Version = "1.30.5" })
	e.clock.Step(24 * time.Hour)
	reconcile(t, r, "refused")
	if lm := e.shoot("refused").GetStatus().GetLastMaintenance(); lm.GetState() != "Succeeded" || lm.GetDescription() != "Maintenance succeeded" || lm.FailureReason != nil {
		t.Fatalf("lastMaintenance %v after a clean maintenance", lm)
	}
}

// TestMaintenanceConflict: the spec write is a compare-and-swap on the state the versions were chosen from.
func TestMaintenanceConflict(t *testing.T) {
	at := time.Date(2030, 6, 3, 22, 0, 0, 0, time.UTC)
	e := newMaintenanceEnv(t, at, profileSpec([]string{"1.30.1", "1.30.5"}, []string{"1.0.0"}))
	r := e.maintenance(MaintenanceConfig{})
	e.createShoot(maintainedShoot("s"))
	stale := e.shoot("s")
	// Someone changes the shoot after the maintenance read it.
	r.validate = func(context.Context, *corev1beta1.Shoot, *corev1beta1.Shoot) error {
		e.updateShoot("s", false, func(s *corev1beta1.Shoot) { s.Spec.Purpose = ptr("production") })
		return nil
	}
	err := r.maintain(t.Context(), stale, at)
	if !apierrors.IsConflict(err) {
		t.Fatalf("maintenance over a concurrent change: %v, want a conflict", err)
	}
	if k, _ := versions(e.shoot("s")); k != "1.30.1" {
		t.Fatal("a maintenance computed from a stale shoot was written")
	}
}

// TestMaintainOperationRules: the operation annotation a maintenance leaves.
func TestMaintainOperationRules(t *testing.T) {
	for _, tc := range []struct {
		name      string
		last      *metav1.LastOperation
		ann       map[string]string
		wantOp    string
		wantAnn   map[string]string
		wantAdded string
	}{
		{"not operated on yet: nothing", nil, map[string]string{AnnotationOperation: "maintain"}, "", map[string]string{}, ""},
		{"succeeded: reconcile", &metav1.LastOperation{State: "Succeeded"}, nil, "reconcile",
			map[string]string{AnnotationOperation: "reconcile"}, ""},
		{"maintenance operations first", &metav1.LastOperation{State: "Succeeded"},
			map[string]string{AnnotationMaintenanceOperation: "rotate-ssh-keypair; reconcile"}, "rotate-ssh-keypair;reconcile",
			map[string]string{AnnotationOperation: "rotate-ssh-keypair;reconcile"}, "rotate-ssh-keypair;reconcile"},
		{"failed: nothing", &metav1.LastOperation{State: "Failed"}, map[string]string{AnnotationOperation: "maintain"}, "", map[string]string{}, ""},
		{"failed and needs retry", &metav1.LastOperation{State: "Failed"}, map[string]string{AnnotationNeedsRetryOperation: "true"}, "retry",
			map[string]string{AnnotationOperation: "retry"}, ""},
		{"processing: reconcile", &metav1.LastOperation{State: "Processing"}, nil, "reconcile", map[string]string{AnnotationOperation: "reconcile"}, ""},
	} {
		s := newShoot("s", func(s *corev1beta1.Shoot) {
			s.Metadata.Annotations = tc.ann
			s.Status = &corev1beta1.ShootStatus{LastOperation: tc.last}
		})
		if s.Metadata.Annotations == nil {
			s.Metadata.Annotations = map[string]string{}
		}
		added := maintainOperation(s)
		got := s.GetMetadata().GetAnnotations()
		if added != tc.wantAdded || got[AnnotationOperation] != tc.wantOp || len(got) != len(tc.wantAnn) {
			t.Errorf("%s: added %q, annotations %v; want %q, %v", tc.name, added, got, tc.wantAdded, tc.wantAnn)
		}
	}
}

func TestMaintenanceMessages(t *testing.T) {
	m := &maintenance{
		controlPlane: &updateResult{description: `Updated Kubernetes version from "1.30.1" to "1.30.5"`, reason: "r1", ok: true},
		poolVersions: []poolResult{{pool: "a", updateResult: updateResult{description: "no version", reason: "r2"}}},
		poolImages:   []poolResult{{pool: "b", updateResult: updateResult{description: "image failed", reason: "r3"}}},
		operations:   []string{`Added "x;reconcile" operation annotation`},
	}
	desc, failure := maintenanceMessages(m)
	wantDesc := `(1/3) maintenance operations successful. Control Plane: Updated Kubernetes version from "1.30.1" to "1.30.5". Reason: r1, ` +
		`Worker pool "a": Kubernetes version maintenance failed. Reason for update: r2, ` +
		`Worker pool "b": machine image version maintenance failed. Reason for update: r3, Added "x;reconcile" operation annotation`
	wantFailure := `Worker pool "a": Kubernetes maintenance failure due to: no version, Worker pool "b": image failed`
	if desc != wantDesc || failure != wantFailure {
		t.Fatalf("description %q\nfailure %q", desc, failure)
	}
	if desc, failure := maintenanceMessages(&maintenance{operations: []string{"op"}}); desc != "All maintenance operations successful. op" || failure != "" {
		t.Fatalf("%q %q", desc, failure)
	}
}
