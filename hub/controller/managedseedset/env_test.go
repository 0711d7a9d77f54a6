package managedseedset_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/controller/managedseedset"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	seedmanagementv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/seedmanagement/v1alpha1"
)

const (
	garden     = managedseedset.GardenNamespace
	setName    = "infra"
	setLabel   = "trellis.dev/managed-seed-set"
	syncPeriod = managedseedset.DefaultSyncPeriod
)

// env is the hub's real store and registry with a fake clock: the garden project and a cloud profile the set's
// shoots are admitted against, and the collections the tests read and write.
type env struct {
	t                                         *testing.T
	ctx                                       context.Context
	reg                                       *api.Registry
	clk                                       *clocktesting.FakeClock
	sets, shoots, managedSeeds, seeds, events *store.Collection
}

func newEnv(t *testing.T) *env {
	t.Helper()
	reg := controllertest.NewRegistry(t)
	col := func(group, resource string) *store.Collection {
		return controllertest.Collection(t, reg, group, resource)
	}
	e := &env{t: t, ctx: t.Context(), reg: reg, clk: clocktesting.NewFakeClock(time.Now()),
		sets: col(managedseedset.Group, "managedseedsets"), managedSeeds: col(managedseedset.Group, "managedseeds"),
		shoots: col("core.gardener.cloud", "shoots"), seeds: col("core.gardener.cloud", "seeds"), events: col("", "events")}
	controllertest.Create(t, col("core.gardener.cloud", "projects"), &corev1beta1.Project{Metadata: &metav1.ObjectMeta{Name: "garden"},
		Spec: &corev1beta1.ProjectSpec{Namespace: proto.String(garden)}})
	controllertest.Create(t, col("core.gardener.cloud", "cloudprofiles"), &corev1beta1.CloudProfile{Metadata: &metav1.ObjectMeta{Name: "local"},
		Spec: &corev1beta1.CloudProfileSpec{Type: "local", Regions: []*corev1beta1.Region{{Name: "local"}},
			MachineTypes:  []*corev1beta1.MachineType{{Name: "m1"}},
			MachineImages: []*corev1beta1.MachineImage{{Name: "gardenlinux", Versions: []*corev1beta1.MachineImageVersion{{Version: "1.0.0", Architectures: []string{"amd64"}}}}},
			Kubernetes:    &corev1beta1.KubernetesSettings{Versions: []*corev1beta1.ExpirableVersion{{Version: "1.33.2"}, {Version: "1.33.5"}}}}})
	// The set's shoots are admitted as the API would, which wants their extension types registered.
	controllertest.Create(t, col("core.gardener.cloud", "controllerregistrations"), &corev1beta1.ControllerRegistration{Metadata: &metav1.ObjectMeta{Name: "provider-local"},
		Spec: &corev1beta1.ControllerRegistrationSpec{Resources: []*corev1beta1.ControllerResource{
			{Kind: "ControlPlane", Type: "local"}, {Kind: "Infrastructure", Type: "local"}, {Kind: "Worker", Type: "local"},
			{Kind: "Network", Type: "calico"}, {Kind: "DNSRecord", Type: "local"}, {Kind: "OperatingSystemConfig", Type: "gardenlinux"}}}})
	return e
}

func (e *env) reconciler(maxRetries int) *managedseedset.Reconciler {
	e.t.Helper()
	r, err := managedseedset.NewReconciler(managedseedset.Config{Source: e.reg, Admission: admission.Builtin(), Clock: e.clk, MaxShootRetries: &maxRetries})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// gardenletConfig is the template's GardenletConfiguration: its seed template carries the set's label and an ingress
// domain with the replica-name placeholder.
const gardenletConfig = `{"apiVersion":"gardenlet.config.gardener.cloud/v1alpha1","kind":"GardenletConfiguration",` +
	`"seedConfig":{"metadata":{"labels":{"` + setLabel + `":"` + setName + `"}},"spec":{` +
	`"provider":{"type":"local","region":"local"},` +
	`"networks":{"pods":"10.1.0.0/16","services":"10.2.0.0/16","nodes":"10.3.0.0/16"},` +
	`"dns":{"provider":{"type":"local","credentialsRef":{"apiVersion":"v1","kind":"Secret","namespace":"garden","name":"dns"}}},` +
	`"ingress":{"domain":"ingress.replica-name.example.com","controller":{"kind":"nginx"}}}}}`

// newSet is a set of replicas as a user writes it; createSet admits it as the API would.
func newSet(replicas int32) *seedmanagementv1alpha1.ManagedSeedSet {
	sel := map[string]string{setLabel: setName}
	return &seedmanagementv1alpha1.ManagedSeedSet{ApiVersion: managedseedset.APIVersion, Kind: managedseedset.Kind,
		Metadata: &metav1.ObjectMeta{Namespace: garden, Name: setName},
		Spec: &seedmanagementv1alpha1.ManagedSeedSetSpec{
			Replicas: proto.Int32(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: &seedmanagementv1alpha1.ManagedSeedTemplate{
				Metadata: &metav1.ObjectMeta{Labels: sel},
				Spec: &seedmanagementv1alpha1.ManagedSeedSpec{Gardenlet: &seedmanagementv1alpha1.GardenletConfig{
					Config: &metav1.RawExtension{Raw: []byte(gardenletConfig)}}},
			},
			ShootTemplate: &corev1beta1.ShootTemplate{
				Metadata: &metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{"example.com/note": "from the template"}},
				Spec: &corev1beta1.ShootSpec{
					CloudProfile: &corev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: "local"},
					Region:       "local",
					Provider: &corev1beta1.Provider{Type: "local",
						Workers: []*corev1beta1.Worker{{Name: "w", Machine: &corev1beta1.Machine{Type: "m1"}}}},
					Kubernetes: &corev1beta1.Kubernetes{Version: "1.33"},
					Dns:        &corev1beta1.DNS{Domain: proto.String("replica-name.example.com")},
				},
			},
		}}
}

// createSet stores a set after the API's defaults and admission checks.
func (e *env) createSet(set *seedmanagementv1alpha1.ManagedSeedSet) *seedmanagementv1alpha1.ManagedSeedSet {
	e.t.Helper()
	p := admission.Builtin().For(set)
	p.Default(set)
	if errs := p.Validate(e.ctx, e.reg, set, nil); len(errs) > 0 {
		e.t.Fatalf("the set is not admitted: %v", errs.ToAggregate())
	}
	return controllertest.Create(e.t, e.sets, set)
}

func (e *env) set() *seedmanagementv1alpha1.ManagedSeedSet {
	e.t.Helper()
	return controllertest.Get[*seedmanagementv1alpha1.ManagedSeedSet](e.t, e.sets, garden, setName)
}

func (e *env) shoot(name string) *corev1beta1.Shoot {
	e.t.Helper()
	return controllertest.Get[*corev1beta1.Shoot](e.t, e.shoots, garden, name)
}

func (e *env) managedSeed(name string) *seedmanagementv1alpha1.ManagedSeed {
	e.t.Helper()
	return controllertest.Get[*seedmanagementv1alpha1.ManagedSeed](e.t, e.managedSeeds, garden, name)
}

func (e *env) seed(name string) *corev1beta1.Seed {
	e.t.Helper()
	return controllertest.Get[*corev1beta1.Seed](e.t, e.seeds, "", name)
}

// eventCount is the count of the Events about the set with reason (summed over messages).
func (e *env) eventCount(reason string) int32 {
	e.t.Helper()
	var n int32
	for _, ev := range controllertest.Events(e.t, e.events, garden, setName, reason) {
		n += ev.GetCount()
	}
	return n
}

func (e *env) eventMessages(reason string) []string {
	e.t.Helper()
	var out []string
	for _, ev := range controllertest.Events(e.t, e.events, garden, setName, reason) {
		out = append(out, ev.GetMessage())
	}
	return out
}

func (e *env) reconcile(r controller.Reconciler) (controller.Result, error) {
	return r.Reconcile(e.ctx, controller.Key{Namespace: garden, Name: setName})
}

// The agent's and gardenlet's part. The agents do not reconcile ManagedSeeds yet, so the tests write what they would:
// the agent of the parent seed the Shoot's finalizer and status (lastOperation, observedGeneration, conditions); the
// hub's shoot-statuslabel controller its health label; the gardenlet deployed into the shoot its Seed and the
// ManagedSeed's registration, and on deletion the removal of both.

// agentShoot writes the shoot's status as the agent does after an operation of type op ended in state, with the
// health label the shoot-statuslabel controller derives ("" leaves it off).
func (e *env) agentShoot(name, op, state, health string) {
	e.t.Helper()
	controllertest.Update(e.t, e.shoots, garden, name, false, func(s *corev1beta1.Shoot) {
		md := s.Metadata
		if md.GetDeletionTimestamp() == nil && !slices.Contains(md.Finalizers, "gardener") {
			md.Finalizers = append(md.Finalizers, "gardener")
		}
		if md.GetAnnotations()[managedseedset.AnnotationOperation] == managedseedset.OperationRetry {
			delete(md.Annotations, managedseedset.AnnotationOperation) // the agent takes the retry
		}
		if md.Labels == nil {
			md.Labels = map[string]string{}
		}
		if health == "" {
			delete(md.Labels, managedseedset.LabelShootStatus)
		} else {
			md.Labels[managedseedset.LabelShootStatus] = health
		}
	})
	controllertest.Update(e.t, e.shoots, garden, name, true, func(s *corev1beta1.Shoot) {
		if s.Status == nil {
			s.Status = &corev1beta1.ShootStatus{}
		}
		s.Status.ObservedGeneration = proto.Int64(s.GetMetadata().GetGeneration())
		s.Status.LastOperation = &metav1.LastOperation{Type: op, State: state, Progress: proto.Int32(100), LastUpdateTime: timestamppb.Now()}
		s.Status.Conditions = nil
		for _, c := range []string{"APIServerAvailable", "ControlPlaneHealthy", "ObservabilityComponentsHealthy", "EveryNodeReady", "SystemComponentsHealthy"} {
			s.Status.Conditions = append(s.Status.Conditions, &metav1.Condition{Type: c, Status: "True"})
		}
	})
}

// shootReady: the shoot's creation succeeded and it is healthy.
func (e *env) shootReady(name string) {
	e.t.Helper()
	e.agentShoot(name, "Create", "Succeeded", "healthy")
}

// agentDeletedShoot: the agent finished the shoot's deletion and removes its finalizer.
func (e *env) agentDeletedShoot(name string) {
	e.t.Helper()
	controllertest.Update(e.t, e.shoots, garden, name, false, func(s *corev1beta1.Shoot) {
		s.Metadata.Finalizers = slices.DeleteFunc(s.Metadata.Finalizers, func(f string) bool { return f == "gardener" })
	})
}

// gardenletRegisters plays gardenlet's managedseed controller: its finalizer on the ManagedSeed, the Seed from the
// configuration's seed template (ready or not) and the ManagedSeed's SeedRegistered condition.
func (e *env) gardenletRegisters(name string, seedReady bool) {
	e.t.Helper()
	controllertest.Update(e.t, e.managedSeeds, garden, name, false, func(ms *seedmanagementv1alpha1.ManagedSeed) {
		if !slices.Contains(ms.Metadata.Finalizers, "gardener") {
			ms.Metadata.Finalizers = append(ms.Metadata.Finalizers, "gardener")
		}
	})
	e.seedReady(name, seedReady)
	controllertest.Update(e.t, e.managedSeeds, garden, name, true, func(ms *seedmanagementv1alpha1.ManagedSeed) {
		ms.Status = &seedmanagementv1alpha1.ManagedSeedStatus{ObservedGeneration: proto.Int64(ms.GetMetadata().GetGeneration()),
			Conditions: []*metav1.Condition{{Type: managedseedset.ConditionSeedRegistered, Status: "True", Reason: "SeedRegistered"}}}
	})
}

// seedReady creates or updates the replica's Seed with the set's labels, ready or not, as its gardenlet reports it.
func (e *env) seedReady(name string, ready bool) {
	e.t.Helper()
	if e.seed(name) == nil {
		controllertest.Create(e.t, e.seeds, &corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: name, Labels: map[string]string{setLabel: setName}},
			Spec: &corev1beta1.SeedSpec{Provider: &corev1beta1.SeedProvider{Type: "local", Region: "local"}}})
	}
	status := "False"
	if ready {
		status = "True"
	}
	controllertest.Update(e.t, e.seeds, "", name, true, func(s *corev1beta1.Seed) {
		s.Status = &corev1beta1.SeedStatus{ObservedGeneration: proto.Int64(s.GetMetadata().GetGeneration()), Conditions: []*metav1.Condition{
			{Type: managedseedset.ConditionGardenletReady, Status: status},
			{Type: managedseedset.ConditionSeedSystemComponentsHealthy, Status: "True"},
		}}
	})
}

// gardenletDeletes plays gardenlet deleting a ManagedSeed: its Seed goes, then its finalizer.
func (e *env) gardenletDeletes(name string) {
	e.t.Helper()
	if e.seed(name) != nil {
		controllertest.Delete(e.t, e.seeds, "", name)
	}
	controllertest.Update(e.t, e.managedSeeds, garden, name, false, func(ms *seedmanagementv1alpha1.ManagedSeed) {
		ms.Metadata.Finalizers = slices.DeleteFunc(ms.Metadata.Finalizers, func(f string) bool { return f == "gardener" })
	})
}

func replica(i int) string { return fmt.Sprintf("%s-%d", setName, i) }

// describe summarises the set's status for failure messages.
func describe(set *seedmanagementv1alpha1.ManagedSeedSet) string {
	st := set.GetStatus()
	p := st.GetPendingReplica()
	return fmt.Sprintf("replicas=%d ready=%d next=%d pending=%s/%s retries=%v", st.GetReplicas(), st.GetReadyReplicas(),
		st.GetNextReplicaNumber(), p.GetName(), p.GetReason(), p.Retries)
}
