package admission_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// TestSeedDeletionWhileUsed: a Seed that shoots still use (by spec.seedName or, while they move away, by
// status.seedName) is not deleted; the message names them.
func TestSeedDeletionWhileUsed(t *testing.T) {
	seed := &corev1beta1.Seed{Metadata: &metav1.ObjectMeta{Name: "ms"}}
	del := plugins.For(seed).ValidateDelete
	sh := func(ns, name, spec, status string) example {
		s := &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: &corev1beta1.ShootSpec{}, Status: &corev1beta1.ShootStatus{}}
		if spec != "" {
			s.Spec.SeedName = proto.String(spec)
		}
		if status != "" {
			s.Status.SeedName = proto.String(status)
		}
		return example{gr: shootsGR, obj: s}
	}
	for _, tc := range []struct {
		name      string
		r         exampleReader
		forbidden string
	}{
		{name: "no shoots", r: nil},
		{name: "shoots of other seeds", r: exampleReader{sh("garden-dev", "a", "other", "other"), sh("garden", "b", "", "")}},
		{name: "a shoot scheduled on it", r: exampleReader{sh("garden-dev", "a", "other", ""), sh("garden-dev", "b", "ms", "")},
			forbidden: "cannot delete seed ms which is still used by shoot(s): garden-dev/b"},
		{name: "a shoot moving away", r: exampleReader{sh("garden", "c", "other", "ms")},
			forbidden: "still used by shoot(s): garden/c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := del(context.Background(), tc.r, seed)
			switch {
			case tc.forbidden == "" && err != nil:
				t.Fatalf("delete refused: %v", err)
			case tc.forbidden != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.forbidden)):
				t.Fatalf("error = %v, want forbidden saying %q", err, tc.forbidden)
			}
		})
	}
}
