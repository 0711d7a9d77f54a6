package controller_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/controller"
)

func TestComputeOperationType(t *testing.T) {
	const (
		create    = extensionsv1alpha1.LastOperationTypeCreate
		reconcile = extensionsv1alpha1.LastOperationTypeReconcile
		del       = extensionsv1alpha1.LastOperationTypeDelete
		migrate   = extensionsv1alpha1.LastOperationTypeMigrate
		restore   = extensionsv1alpha1.LastOperationTypeRestore
		ok        = extensionsv1alpha1.LastOperationStateSucceeded
		failed    = extensionsv1alpha1.LastOperationStateError
	)
	last := func(typ extensionsv1alpha1.LastOperationType, state extensionsv1alpha1.LastOperationState) *extensionsv1alpha1.LastOperation {
		return &extensionsv1alpha1.LastOperation{Type: typ, State: state}
	}
	for _, tc := range []struct {
		name     string
		op       string
		deleting bool
		last     *extensionsv1alpha1.LastOperation
		want     extensionsv1alpha1.LastOperationType
		skip     bool
	}{
		{name: "new", want: create},
		{name: "create failed", last: last(create, failed), want: create},
		{name: "created", last: last(create, ok), want: reconcile},
		{name: "reconcile failed", last: last(reconcile, failed), want: reconcile},
		{name: "reconcile requested", op: "reconcile", last: last(create, ok), want: reconcile},
		{name: "migrate wins over deletion", op: "migrate", deleting: true, last: last(reconcile, ok), want: migrate},
		{name: "deletion wins over restore", op: "restore", deleting: true, last: last(reconcile, ok), want: del},
		{name: "restore", op: "restore", last: last(migrate, ok), want: restore},
		{name: "unfinished migrate", last: last(migrate, failed), want: migrate},
		{name: "unfinished restore", last: last(restore, failed), want: restore},
		{name: "migrated: reconcile skipped", op: "reconcile", last: last(migrate, ok), want: reconcile, skip: true},
		{name: "migrated: deletion skipped", deleting: true, last: last(migrate, ok), want: del, skip: true},
		{name: "migrated: migrate again", op: "migrate", last: last(migrate, ok), want: migrate},
	} {
		obj := &infra{}
		if tc.op != "" {
			obj.Annotations = map[string]string{extensionsv1alpha1.AnnotationOperation: tc.op}
		}
		if tc.deleting {
			now := metav1.NewTime(time.Now())
			obj.DeletionTimestamp = &now
		}
		obj.Status.LastOperation = tc.last
		got := controller.ComputeOperationType(obj)
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		if skip := controller.ShouldSkipOperation(got, obj); skip != tc.skip {
			t.Errorf("%s: skip %v, want %v", tc.name, skip, tc.skip)
		}
	}
}
