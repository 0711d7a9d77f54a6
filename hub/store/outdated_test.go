package store_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trellis-dev/trellis/hub/store"
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

// countingLimiter counts the writes that waited for it.
type countingLimiter struct{ waits int }

func (l *countingLimiter) Wait(context.Context) error { l.waits++; return nil }

// TestWriteLimiter: under WithWriteLimiter every write to etcd waits for the limiter once; reads and an update that
// changes nothing do not.
func TestWriteLimiter(t *testing.T) {
	c, err := storetest.NewStore(t).Register(t.Context(), storetest.Shoots())
	if err != nil {
		t.Fatal(err)
	}
	l := &countingLimiter{}
	ctx := store.WithWriteLimiter(t.Context(), l)
	obj, err := c.Create(ctx, &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "s"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "garden-dev", "s"); err != nil {
		t.Fatal(err)
	}
	same := obj.(*corev1beta1.Shoot)
	same.Metadata.ResourceVersion = ""
	if _, err := c.Update(ctx, same); err != nil { // no change: nothing written
		t.Fatal(err)
	}
	if _, _, err := c.Delete(ctx, "garden-dev", "s", nil); err != nil {
		t.Fatal(err)
	}
	if l.waits != 2 {
		t.Fatalf("%d writes waited for the limiter, want 2 (the create and the delete)", l.waits)
	}
}
