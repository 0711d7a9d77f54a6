package shoot

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	hour := time.Hour
	type shoot struct {
		specSeed, statusSeed string
		gen, observed        int64
		deleting, finalizer  bool
		annotation           string
		lastType, lastState  string
		lastUpdate           time.Time
	}
	mk := func(s shoot) *corev1beta1.Shoot {
		out := &corev1beta1.Shoot{
			Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "s", Generation: s.gen, Annotations: map[string]string{}},
			Spec:     &corev1beta1.ShootSpec{},
			Status:   &corev1beta1.ShootStatus{ObservedGeneration: proto.Int64(s.observed)},
		}
		if s.specSeed != "" {
			out.Spec.SeedName = proto.String(s.specSeed)
		}
		if s.statusSeed != "" {
			out.Status.SeedName = proto.String(s.statusSeed)
		}
		if s.deleting {
			out.Metadata.DeletionTimestamp = timestamppb.New(now)
		}
		if s.finalizer {
			out.Metadata.Finalizers = []string{FinalizerGardener}
		}
		if s.annotation != "" {
			out.Metadata.Annotations[annotationOperation] = s.annotation
		}
		if s.lastType != "" {
			out.Status.LastOperation = &metav1.LastOperation{Type: s.lastType, State: s.lastState, LastUpdateTime: timestamppb.New(s.lastUpdate)}
		}
		return out
	}
	recent := now.Add(-time.Minute)
	for _, tc := range []struct {
		name      string
		shoot     shoot
		flow      Flow
		typ       string
		retry     bool
		requeueIn time.Duration
	}{
		{"other seed's shoot", shoot{specSeed: "other"}, FlowNone, "", false, 0},
		{"unscheduled shoot", shoot{}, FlowNone, "", false, 0},
		{"new shoot", shoot{specSeed: "a", gen: 1}, FlowReconcile, opCreate, false, 0},
		{"create interrupted", shoot{specSeed: "a", statusSeed: "a", gen: 1, lastType: opCreate, lastState: stateProcessing, lastUpdate: recent}, FlowReconcile, opCreate, false, 0},
		{"create failed with error", shoot{specSeed: "a", statusSeed: "a", gen: 1, observed: 1, lastType: opCreate, lastState: stateError, lastUpdate: recent}, FlowReconcile, opCreate, true, 0},
		{"up to date", shoot{specSeed: "a", statusSeed: "a", gen: 2, observed: 2, lastType: opReconcile, lastState: stateSucceeded, lastUpdate: recent}, FlowNone, "", false, 59 * time.Minute},
		{"generation moved", shoot{specSeed: "a", statusSeed: "a", gen: 3, observed: 2, lastType: opReconcile, lastState: stateSucceeded, lastUpdate: recent}, FlowReconcile, opReconcile, false, 0},
		{"sync period passed", shoot{specSeed: "a", statusSeed: "a", gen: 2, observed: 2, lastType: opReconcile, lastState: stateSucceeded, lastUpdate: now.Add(-2 * hour)}, FlowReconcile, opReconcile, false, 0},
		{"reconcile annotation", shoot{specSeed: "a", statusSeed: "a", gen: 2, observed: 2, annotation: "reconcile", lastType: opReconcile, lastState: stateSucceeded, lastUpdate: recent}, FlowReconcile, opReconcile, false, 0},
		{"failed waits", shoot{specSeed: "a", statusSeed: "a", gen: 2, observed: 2, lastType: opReconcile, lastState: stateFailed, lastUpdate: recent}, FlowNone, "", false, 0},
		{"rotation annotation", shoot{specSeed: "a", statusSeed: "a", gen: 2, observed: 2, annotation: "rotate-credentials-start", lastType: opReconcile, lastState: stateSucceeded, lastUpdate: recent}, FlowReconcile, opReconcile, false, 0},
		{"maintenance's operations", shoot{specSeed: "a", statusSeed: "a", gen: 2, observed: 2, annotation: "rotate-ssh-keypair;reconcile", lastType: opReconcile, lastState: stateSucceeded, lastUpdate: recent}, FlowReconcile, opReconcile, false, 0},
		{"maintain is the hub's", shoot{specSeed: "a", statusSeed: "a", gen: 2, observed: 2, annotation: "maintain", lastType: opReconcile, lastState: stateSucceeded, lastUpdate: recent}, FlowNone, "", false, 59 * time.Minute},
		{"failed retried on request", shoot{specSeed: "a", statusSeed: "a", gen: 2, observed: 2, annotation: "retry", lastType: opReconcile, lastState: stateFailed, lastUpdate: recent}, FlowReconcile, opReconcile, false, 0},
		{"failed retried on spec change", shoot{specSeed: "a", statusSeed: "a", gen: 3, observed: 2, lastType: opReconcile, lastState: stateFailed, lastUpdate: recent}, FlowReconcile, opReconcile, false, 0},
		{"deleting", shoot{specSeed: "a", statusSeed: "a", gen: 2, observed: 2, deleting: true, finalizer: true, lastType: opReconcile, lastState: stateSucceeded}, FlowDelete, opDelete, false, 0},
		{"deleting without our finalizer", shoot{specSeed: "a", deleting: true}, FlowNone, "", false, 0},
		{"migrate away", shoot{specSeed: "b", statusSeed: "a", gen: 3, observed: 2, lastType: opReconcile, lastState: stateSucceeded}, FlowMigrate, opMigrate, false, 0},
		{"destination waits for the source", shoot{specSeed: "b", statusSeed: "a", gen: 3, observed: 2, lastType: opMigrate, lastState: stateProcessing}, FlowNone, "", false, 0},
		{"restore after migration", shoot{specSeed: "a", gen: 3, observed: 2, lastType: opMigrate, lastState: stateSucceeded}, FlowReconcile, opRestore, false, 0},
		{"restore interrupted", shoot{specSeed: "a", statusSeed: "a", gen: 3, observed: 2, lastType: opRestore, lastState: stateProcessing}, FlowReconcile, opRestore, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed := "a"
			if tc.name == "destination waits for the source" {
				seed = "b"
			}
			d := decide(seed, mk(tc.shoot), now, hour)
			if d.Flow != tc.flow || d.Type != tc.typ || d.Retry != tc.retry || d.RequeueAfter != tc.requeueIn {
				t.Fatalf("decide = %+v, want flow %s type %q retry %v requeue %v", d, tc.flow, tc.typ, tc.retry, tc.requeueIn)
			}
		})
	}
}

func TestTechnicalID(t *testing.T) {
	if got := TechnicalID(projectOf("garden-dev"), "web"); got != "shoot--dev--web" {
		t.Fatalf("got %s", got)
	}
	if got := projectOf("garden"); got != "garden" {
		t.Fatalf("got %s", got)
	}
}
