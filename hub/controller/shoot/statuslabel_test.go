package shoot

import (
	"testing"
	"time"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func conds(statuses ...string) []*metav1.Condition {
	var out []*metav1.Condition
	for i, s := range statuses {
		out = append(out, &metav1.Condition{Type: shootConditionTypes[i%len(shootConditionTypes)], Status: s})
	}
	return out
}

func TestComputeStatus(t *testing.T) {
	op := func(typ, state string) *metav1.LastOperation { return &metav1.LastOperation{Type: typ, State: state} }
	errs := []*metav1.LastError{{Description: "boom"}}
	for _, tc := range []struct {
		name   string
		op     *metav1.LastOperation
		errs   []*metav1.LastError
		conds  []*metav1.Condition
		expect Status
	}{
		{"not operated on yet", nil, errs, conds("False"), StatusHealthy},
		{"creating without errors", op("Create", "Processing"), nil, conds("False"), StatusHealthy},
		{"creating with errors", op("Create", "Error"), errs, conds("True"), StatusUnhealthy},
		{"create succeeded: conditions count", op("Create", "Succeeded"), nil, conds("True", "Progressing"), StatusProgressing},
		{"deleting without errors", op("Delete", "Processing"), nil, conds("False"), StatusHealthy},
		{"deleting with errors", op("Delete", "Processing"), errs, nil, StatusUnhealthy},
		{"reconciled, all true", op("Reconcile", "Succeeded"), nil, conds("True", "True", "True"), StatusHealthy},
		{"reconciled, one unknown", op("Reconcile", "Succeeded"), nil, conds("True", "Unknown", "Progressing"), StatusUnknown},
		{"reconciled, one false", op("Reconcile", "Succeeded"), nil, conds("Unknown", "False"), StatusUnhealthy},
		{"reconciling without errors", op("Reconcile", "Processing"), nil, conds("True", "Progressing"), StatusProgressing},
		{"reconciling with errors", op("Reconcile", "Processing"), errs, conds("True"), StatusUnhealthy},
		{"reconcile error", op("Reconcile", "Error"), nil, conds("True"), StatusUnhealthy},
		{"reconcile failed", op("Reconcile", "Failed"), nil, conds("True"), StatusUnhealthy},
		{"unrecognized condition status", op("Reconcile", "Succeeded"), nil, conds("Maybe"), StatusUnhealthy},
	} {
		if got := ComputeStatus(tc.op, tc.errs, tc.conds); got != tc.expect {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.expect)
		}
	}
}

// TestStatusLabelReconcile: the label follows the status; a label already right is not written.
func TestStatusLabelReconcile(t *testing.T) {
	e := newEnv(t, time.Now())
	r := &statusLabelReconciler{shoots: e.c.shoots, log: testLog()}
	e.createShoot(newShoot("s"))
	label := func() string { return e.shoot("s").GetMetadata().GetLabels()[LabelStatus] }

	reconcile(t, r, "s")
	if label() != "healthy" {
		t.Fatalf("label %q for a new shoot, want healthy", label())
	}
	rv := e.shoot("s").GetMetadata().GetResourceVersion()
	reconcile(t, r, "s")
	if e.shoot("s").GetMetadata().GetResourceVersion() != rv {
		t.Fatal("an unchanged label was written")
	}
	e.updateShoot("s", true, func(s *corev1beta1.Shoot) {
		s.Status = &corev1beta1.ShootStatus{LastOperation: &metav1.LastOperation{Type: "Reconcile", State: "Succeeded"},
			Conditions: conds("True", "Unknown")}
	})
	reconcile(t, r, "s")
	if label() != "unknown" {
		t.Fatalf("label %q, want unknown", label())
	}
	if gen := e.shoot("s").GetMetadata().GetGeneration(); gen != 1 {
		t.Fatalf("the label moved the generation to %d", gen)
	}
}
