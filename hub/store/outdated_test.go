package store_test

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trellis-dev/trellis/hub/store/storetest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// TestOutdated: a precondition older than the cached object is a Conflict before any write; the current version, an
// unknown object and no precondition pass on to the write.
func TestOutdated(t *testing.T) {
	ctx := t.Context()
	c, err := storetest.NewStore(t).Register(ctx, storetest.Shoots())
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Create(ctx, &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "s"}})
	if err != nil {
		t.Fatal(err)
	}
	rv1 := first.GetMetadata().GetResourceVersion()
	next := first.(*corev1beta1.Shoot)
	next.Metadata.Labels = map[string]string{"a": "b"}
	second, err := c.Update(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	rv2 := second.GetMetadata().GetResourceVersion()
	if err := c.AtLeast(ctx, rv2); err != nil {
		t.Fatal(err)
	}
	if err := c.Outdated("garden-dev", "s", rv1); !apierrors.IsConflict(err) {
		t.Errorf("Outdated with the first version %s after %s: %v, want Conflict", rv1, rv2, err)
	}
	for _, tc := range []struct{ name, rv string }{{"s", rv2}, {"s", ""}, {"missing", "1"}, {"s", "x"}} {
		if err := c.Outdated("garden-dev", tc.name, tc.rv); err != nil {
			t.Errorf("Outdated(%s, %q): %v, want nil", tc.name, tc.rv, err)
		}
	}
}
