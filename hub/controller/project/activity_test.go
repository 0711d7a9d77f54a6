package project

import (
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
)

// activityStep is one change of an object, as the source hands it to Map: the object's new state, or its last state
// after a deletion.
type activityStep struct {
	what   string
	change func(e *env) store.Object
	active bool
}

func (e *env) write(c *store.Collection, namespace, name string, status bool, mutate func(store.Object)) func(*env) store.Object {
	return func(e *env) store.Object {
		out, err := c.GuaranteedUpdate(e.ctx, namespace, name, status, func(cur store.Object) (store.Object, error) {
			mutate(cur)
			return cur, nil
		})
		if err != nil {
			e.t.Fatal(err)
		}
		return out
	}
}

func (e *env) remove(c *store.Collection, namespace, name string) func(*env) store.Object {
	return func(e *env) store.Object {
		out, _, err := c.Delete(e.ctx, namespace, name, nil)
		if err != nil {
			e.t.Fatal(err)
		}
		return out
	}
}

// TestActivity: which changes count as activity of the project, as Gardener's predicates decide.
func TestActivity(t *testing.T) {
	type scenario struct {
		name     string
		labelled bool // the Secrets/Quotas filter
		steps    func(e *env) []activityStep
	}
	sb := map[string]string{LabelSecretBindingReference: "true"}
	for _, sc := range []scenario{
		{name: "shoot: created, relabelled, status, spec, deletion mark, gone", steps: func(e *env) []activityStep {
			c := e.c.shoots
			return []activityStep{
				{"created", func(e *env) store.Object { return controllertest.Create(e.t, c, newShoot("garden-dev", "s")) }, true},
				{"labels changed", e.write(c, "garden-dev", "s", false, func(o store.Object) { o.GetMetadata().Labels = map[string]string{"a": "b"} }), false},
				{"status changed", e.write(c, "garden-dev", "s", true, func(o store.Object) {
					o.(*corev1beta1.Shoot).Status = &corev1beta1.ShootStatus{TechnicalId: "x"}
				}), false},
				{"spec changed", e.write(c, "garden-dev", "s", false, func(o store.Object) { o.(*corev1beta1.Shoot).Spec.Region = "other" }), true},
				{"finalizer added", e.write(c, "garden-dev", "s", false, withFinalizers("gardener")), false},
				{"marked for deletion", e.remove(c, "garden-dev", "s"), true},
				{"gone", func(e *env) store.Object {
					e.write(c, "garden-dev", "s", false, withFinalizers())(e)
					return controllertest.Get[store.Object](e.t, c, "garden-dev", "s") // nil: the source hands over the last state
				}, true},
			}
		}},
		{name: "shoot deleted without finalizers", steps: func(e *env) []activityStep {
			c := e.c.shoots
			return []activityStep{
				{"created", func(e *env) store.Object { return controllertest.Create(e.t, c, newShoot("garden-dev", "s")) }, true},
				{"deleted", e.remove(c, "garden-dev", "s"), true},
			}
		}},
		{name: "shoot older than an hour, first seen after a start", steps: func(e *env) []activityStep {
			c := e.c.shoots
			return []activityStep{
				{"seen", func(e *env) store.Object {
					o := controllertest.Create(e.t, c, newShoot("garden-dev", "s"))
					e.clk.Step(time.Hour + time.Second)
					return o
				}, false},
				{"spec changed", e.write(c, "garden-dev", "s", false, func(o store.Object) { o.(*corev1beta1.Shoot).Spec.Region = "other" }), true},
			}
		}},
		{name: "shoot in a namespace of no project", steps: func(e *env) []activityStep {
			return []activityStep{{"created", func(e *env) store.Object { return controllertest.Create(e.t, e.c.shoots, newShoot("elsewhere", "s")) }, false}}
		}},
		{name: "secret with a binding reference label", labelled: true, steps: func(e *env) []activityStep {
			c := e.c.secrets
			return []activityStep{
				{"created labelled", func(e *env) store.Object { return controllertest.Create(e.t, c, newSecret("garden-dev", "s", sb)) }, true},
				{"data changed", e.write(c, "garden-dev", "s", false, func(o store.Object) { o.(*kcorev1.Secret).Data["k"] = []byte("w") }), true},
				{"label removed", e.write(c, "garden-dev", "s", false, func(o store.Object) { o.GetMetadata().Labels = nil }), true},
				{"unlabelled change", e.write(c, "garden-dev", "s", false, func(o store.Object) { o.(*kcorev1.Secret).Data["k"] = []byte("x") }), false},
				{"credentials binding label added", e.write(c, "garden-dev", "s", false, func(o store.Object) {
					o.GetMetadata().Labels = map[string]string{LabelCredentialsBindingReference: "true"}
				}), true},
				{"deleted labelled", e.remove(c, "garden-dev", "s"), true},
			}
		}},
		{name: "secret without a binding reference label", labelled: true, steps: func(e *env) []activityStep {
			c := e.c.secrets
			return []activityStep{
				{"created", func(e *env) store.Object { return controllertest.Create(e.t, c, newSecret("garden-dev", "s", nil)) }, false},
				{"changed", e.write(c, "garden-dev", "s", false, func(o store.Object) { o.(*kcorev1.Secret).Data["k"] = []byte("w") }), false},
				{"deleted", e.remove(c, "garden-dev", "s"), false},
			}
		}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			e := newEnv(t)
			controllertest.Create(e.t, e.c.namespaces, newNamespace("garden-dev", projectLabels("dev"), nil))
			controllertest.Create(e.t, e.c.namespaces, newNamespace("elsewhere", nil, nil))
			coll := e.c.shoots
			if sc.labelled {
				coll = e.c.secrets
			}
			pending := &pendingActivity{projects: map[string]bool{}}
			f := &activityFilter{coll: coll, labelled: sc.labelled, clock: e.clk, pending: pending, known: map[string]objectState{},
				projectOf: func(ns string) string { return e.c.projectOfNamespace(e.ctx, ns) }}
			var last store.Object
			for _, step := range sc.steps(e) {
				obj := step.change(e)
				if obj == nil {
					obj = last
				}
				last = obj
				keys := f.Map(obj)
				active := pending.take("dev")
				if active != step.active || (len(keys) > 0) != step.active {
					t.Fatalf("%s: activity %t (keys %v), want %t", step.what, active, keys, step.active)
				}
			}
		})
	}
}

// TestActivityReconcile: the reconciler writes now for pending activity only, and not to a project being deleted.
func TestActivityReconcile(t *testing.T) {
	e := newEnv(t)
	e.readyProject("dev")
	pending := &pendingActivity{projects: map[string]bool{}}
	r := &activityReconciler{projects: e.c.projects, pending: pending, clock: e.clk}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(e.ctx, controller.Key{Name: "dev"}); err != nil {
			t.Fatal(err)
		}
	}
	reconcile()
	if la := e.project("dev").GetStatus().GetLastActivityTimestamp(); la != nil {
		t.Fatalf("lastActivityTimestamp %v without activity", la)
	}
	e.clk.Step(40 * day)
	pending.add("dev")
	reconcile()
	if la := e.project("dev").GetStatus().GetLastActivityTimestamp(); la == nil || !la.AsTime().Equal(e.clk.Now().UTC().Truncate(time.Second)) {
		t.Fatalf("lastActivityTimestamp %v, want %v", la, e.clk.Now())
	}
	before := e.project("dev").GetStatus().GetLastActivityTimestamp().AsTime()
	controllertest.Update(e.t, e.c.projects, "", "dev", false, func(o store.Object) {
		o.GetMetadata().Annotations = map[string]string{AnnotationConfirmDeletion: "true"}
	})
	controllertest.Delete(e.t, e.c.projects, "", "dev")
	e.clk.Step(time.Hour)
	pending.add("dev")
	reconcile()
	if la := e.project("dev").GetStatus().GetLastActivityTimestamp().AsTime(); !la.Equal(before) {
		t.Fatalf("lastActivityTimestamp of a project being deleted moved to %v", la)
	}
}
