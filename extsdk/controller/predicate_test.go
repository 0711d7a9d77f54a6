package controller_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/controller"
)

func TestDefaultPredicate(t *testing.T) {
	p := controller.DefaultPredicate()
	obj := func(op string, deleting bool, state extensionsv1alpha1.LastOperationState) *infra {
		o := &infra{}
		if op != "" {
			o.Annotations = map[string]string{extensionsv1alpha1.AnnotationOperation: op}
		}
		if deleting {
			now := metav1.NewTime(time.Now())
			o.DeletionTimestamp = &now
		}
		if state != "" {
			o.Status.LastOperation = &extensionsv1alpha1.LastOperation{Type: extensionsv1alpha1.LastOperationTypeReconcile, State: state}
		}
		return o
	}
	const ok, failed = extensionsv1alpha1.LastOperationStateSucceeded, extensionsv1alpha1.LastOperationStateError
	for name, tc := range map[string]struct {
		o    *infra
		want bool
	}{
		"new":            {obj("", false, ""), true},
		"succeeded":      {obj("", false, ok), false},
		"failed":         {obj("", false, failed), true},
		"reconcile":      {obj("reconcile", false, ok), true},
		"migrate":        {obj("migrate", false, ok), true},
		"wait-for-state": {obj("wait-for-state", false, ok), false},
		"deleting":       {obj("", true, ok), true},
	} {
		if got := p.Create(event.CreateEvent{Object: tc.o}); got != tc.want {
			t.Errorf("create %s: %v", name, got)
		}
	}
	for name, tc := range map[string]struct {
		old, new *infra
		want     bool
	}{
		"plain update":                     {obj("", false, ok), obj("", false, ok), false},
		"status became Error":              {obj("", false, ok), obj("", false, failed), false},
		"annotation":                       {obj("", false, ok), obj("reconcile", false, ok), true},
		"restore":                          {obj("wait-for-state", false, ok), obj("restore", false, ok), true},
		"wait-for-state":                   {obj("", false, ok), obj("wait-for-state", false, ok), false},
		"deletion":                         {obj("", false, ok), obj("", true, ok), true},
		"own status write during deletion": {obj("", true, ok), obj("", true, failed), false},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("update %s: %v", name, got)
		}
	}
	if p.Delete(event.DeleteEvent{Object: obj("reconcile", true, "")}) || p.Generic(event.GenericEvent{Object: obj("reconcile", false, "")}) {
		t.Error("delete or generic event admitted")
	}
}
