package shoot

import (
	"context"
	"log/slog"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Status is a value of the label shoot.gardener.cloud/status.
type Status string

// Statuses, from best to worst.
const (
	StatusHealthy     Status = "healthy"
	StatusProgressing Status = "progressing"
	StatusUnknown     Status = "unknown"
	StatusUnhealthy   Status = "unhealthy"
)

func (s Status) rank() int {
	switch s {
	case StatusHealthy:
		return 3
	case StatusProgressing:
		return 2
	case StatusUnknown:
		return 1
	}
	return 0
}

// orWorse returns the worse of s and o.
func (s Status) orWorse(o Status) Status {
	if o.rank() < s.rank() {
		return o
	}
	return s
}

func conditionStatus(status string) Status {
	switch status {
	case "True":
		return StatusHealthy
	case "Progressing":
		return StatusProgressing
	case "Unknown":
		return StatusUnknown
	}
	return StatusUnhealthy
}

func healthyIf(ok bool) Status {
	if ok {
		return StatusHealthy
	}
	return StatusUnhealthy
}

// ComputeStatus is Gardener's ComputeShootStatus: a shoot not yet operated on is healthy; while it is being created
// (until the create succeeded) or deleted, it is unhealthy exactly when it has last errors; otherwise the worst of
// its conditions, and of its last errors while an operation is processing, or of whether the last operation
// succeeded.
func ComputeStatus(lastOperation *metav1.LastOperation, lastErrors []*metav1.LastError, conditions []*metav1.Condition) Status {
	if lastOperation == nil {
		return StatusHealthy
	}
	if (lastOperation.GetType() == "Create" && lastOperation.GetState() != lastOperationStateSucceeded) || lastOperation.GetType() == "Delete" {
		return healthyIf(len(lastErrors) == 0)
	}
	status := StatusHealthy
	for _, c := range conditions {
		status = status.orWorse(conditionStatus(c.GetStatus()))
	}
	if lastOperation.GetState() == lastOperationStateProcessing {
		return status.orWorse(healthyIf(len(lastErrors) == 0))
	}
	return status.orWorse(healthyIf(lastOperation.GetState() == lastOperationStateSucceeded))
}

func shootStatus(s *corev1beta1.Shoot) Status {
	st := s.GetStatus()
	return ComputeStatus(st.GetLastOperation(), st.GetLastErrors(), st.GetConditions())
}

// statusLabelDigest: the status the shoot should be labelled with and the label it has.
func statusLabelDigest(o store.Object) string {
	s := o.(*corev1beta1.Shoot)
	return string(shootStatus(s)) + "|" + s.GetMetadata().GetLabels()[LabelStatus]
}

// statusLabelReconciler keeps the label shoot.gardener.cloud/status.
type statusLabelReconciler struct {
	shoots *store.Collection
	log    *slog.Logger
}

// Reconcile sets the label to the shoot's current status.
func (r *statusLabelReconciler) Reconcile(ctx context.Context, k controller.Key) (controller.Result, error) {
	s, err := getShoot(ctx, r.shoots, k)
	if err != nil || s == nil {
		return controller.Result{}, err
	}
	if cur, ok := s.GetMetadata().GetLabels()[LabelStatus]; ok && cur == string(shootStatus(s)) {
		return controller.Result{}, nil
	}
	_, err = updateShoot(ctx, r.shoots, k, false, func(cur *corev1beta1.Shoot) bool {
		want := string(shootStatus(cur))
		if v, ok := cur.GetMetadata().GetLabels()[LabelStatus]; ok && v == want {
			return false
		}
		if cur.Metadata.Labels == nil {
			cur.Metadata.Labels = map[string]string{}
		}
		cur.Metadata.Labels[LabelStatus] = want
		r.log.Debug("updating the status label", "shoot", k.String(), "status", want)
		return true
	})
	return controller.Result{}, err
}
