package controllertest

import (
	"github.com/trellis-dev/trellis/hub/admission"
	"testing"

	"google.golang.org/grpc"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
)

// NewRegistry returns the hub's registry of kinds on a new real store (storetest.NewStore), with the hub's admission
// plugins and without a served API; the store closes when the test ends.
func NewRegistry(t testing.TB, indexes ...api.Index) *api.Registry {
	t.Helper()
	reg, err := api.NewRegistry(t.Context(), api.Config{Store: storetest.NewStore(t), Services: grpc.NewServer(), Admission: admission.Builtin(), Indexes: indexes})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// Collection returns the registry's collection of group and resource ("" is the core group); the test fails when
// the registry does not serve it.
func Collection(t testing.TB, reg *api.Registry, group, resource string) *store.Collection {
	t.Helper()
	gr := schema.GroupResource{Group: group, Resource: resource}
	c, ok := reg.Collection(gr)
	if !ok {
		t.Fatalf("%s not served", gr)
	}
	return c
}

// Create stores obj and returns the stored object.
func Create[T store.Object](t testing.TB, c *store.Collection, obj T) T {
	t.Helper()
	out, err := c.Create(t.Context(), obj)
	if err != nil {
		t.Fatal(err)
	}
	return out.(T)
}

// Update applies mutate to the current object and writes it, its status only when status is set
// (GuaranteedUpdate: mutate runs again on the new state when the object changed in between).
func Update[T store.Object](t testing.TB, c *store.Collection, namespace, name string, status bool, mutate func(T)) {
	t.Helper()
	if _, err := c.GuaranteedUpdate(t.Context(), namespace, name, status, func(cur store.Object) (store.Object, error) {
		mutate(cur.(T))
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Delete deletes the object (with finalizers it is only marked).
func Delete(t testing.TB, c *store.Collection, namespace, name string) {
	t.Helper()
	if _, _, err := c.Delete(t.Context(), namespace, name, nil); err != nil {
		t.Fatal(err)
	}
}

// Get returns the object, or the zero T (nil) when it does not exist.
func Get[T store.Object](t testing.TB, c *store.Collection, namespace, name string) T {
	t.Helper()
	obj, err := c.Get(t.Context(), namespace, name)
	if apierrors.IsNotFound(err) {
		var zero T
		return zero
	}
	if err != nil {
		t.Fatal(err)
	}
	return obj.(T)
}

// Events returns the Events in namespace ("": all) about the object name with reason, in the store's order; an
// empty name or reason matches every one.
func Events(t testing.TB, events *store.Collection, namespace, name, reason string) []*kcorev1.Event {
	t.Helper()
	res, err := events.List(t.Context(), namespace, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*kcorev1.Event
	for _, o := range res.Items {
		ev := o.(*kcorev1.Event)
		if (name == "" || ev.GetInvolvedObject().GetName() == name) && (reason == "" || ev.GetReason() == reason) {
			out = append(out, ev)
		}
	}
	return out
}
