package backupentry

import (
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/agent/hubobject"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func TestOperationType(t *testing.T) {
	entry := func(ann map[string]string, deleting bool, lo *metav1.LastOperation) *corev1beta1.BackupEntry {
		e := &corev1beta1.BackupEntry{Metadata: &metav1.ObjectMeta{Annotations: ann}, Status: &corev1beta1.BackupEntryStatus{LastOperation: lo}}
		if deleting {
			e.Metadata.DeletionTimestamp = timestamppb.Now()
		}
		return e
	}
	last := func(typ, state string) *metav1.LastOperation { return &metav1.LastOperation{Type: typ, State: state} }
	restore := map[string]string{"gardener.cloud/operation": "restore"}
	for _, tc := range []struct {
		name string
		e    *corev1beta1.BackupEntry
		want string
	}{
		{"new", entry(nil, false, nil), opCreate},
		{"create interrupted", entry(nil, false, last(opCreate, hubobject.StateError)), opCreate},
		{"created", entry(nil, false, last(opCreate, hubobject.StateSucceeded)), opReconcile},
		{"reconciled", entry(nil, false, last(opReconcile, hubobject.StateError)), opReconcile},
		{"deleting", entry(restore, true, last(opReconcile, hubobject.StateSucceeded)), opDelete},
		{"asked to restore", entry(restore, false, last(opReconcile, hubobject.StateSucceeded)), opRestore},
		{"migrated here", entry(nil, false, last(opMigrate, hubobject.StateSucceeded)), opRestore},
		{"restore interrupted", entry(nil, false, last(opRestore, hubobject.StateError)), opRestore},
		{"restored", entry(nil, false, last(opRestore, hubobject.StateSucceeded)), opReconcile},
	} {
		if got := operationType(tc.e); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
