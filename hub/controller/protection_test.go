package controller_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
)

const testFinalizer = "test.trellis.dev/protection"

func TestProtectionHoldsDeletionWhileInUse(t *testing.T) {
	c := shoots(t)
	var users atomic.Int32
	users.Store(1)
	p := &controller.Protection{Collection: c, Finalizer: testFinalizer,
		InUse: func(context.Context, store.Object) ([]string, error) {
			if users.Load() > 0 {
				return []string{"a user"}, nil
			}
			return nil, nil
		}}
	ctrl := run(t, controller.Config{Name: "protection", Reconciler: p, Sources: []controller.Source{{Collection: c}}})
	create(t, c, storetest.NewShoot("garden-a", "s", "", nil))
	finalizers := func() []string {
		obj, err := c.Get(t.Context(), "garden-a", "s")
		if err != nil {
			return nil
		}
		return obj.GetMetadata().GetFinalizers()
	}
	controllertest.Eventually(t, "the finalizer", func() bool { return slices.Contains(finalizers(), testFinalizer) })

	// Deleting marks the object; the finalizer stays while it is in use.
	if _, deleted, err := c.Delete(t.Context(), "garden-a", "s", nil); err != nil || deleted {
		t.Fatalf("delete: deleted=%v err=%v, want marked for deletion", deleted, err)
	}
	time.Sleep(300 * time.Millisecond)
	if !slices.Contains(finalizers(), testFinalizer) {
		t.Fatal("the finalizer went while the object is in use")
	}
	// The last user goes; the object follows once it is enqueued.
	users.Store(0)
	ctrl.Enqueue(controller.Key{Namespace: "garden-a", Name: "s"})
	controllertest.Eventually(t, "the object to go", func() bool {
		_, err := c.Get(t.Context(), "garden-a", "s")
		return apierrors.IsNotFound(err)
	})
}
