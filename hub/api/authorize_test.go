package api

import (
	"testing"

	"github.com/trellis-dev/trellis/hub/store"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func secretAt(name, rv, seed string) *kcorev1.Secret {
	return &kcorev1.Secret{Metadata: &metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv, Labels: map[string]string{"seed": seed}}}
}

// visibleToA: objects labelled seed=a are visible.
func visibleToA(obj store.Object) bool { return obj.GetMetadata().GetLabels()["seed"] == "a" }

type step struct {
	in       store.Event
	wantType store.EventType // "" when nothing is sent
	wantRV   string
	wantSeed string // label of the object sent
}

func runSteps(t *testing.T, v *visibility, steps []step) {
	t.Helper()
	for i, s := range steps {
		out, ok := v.filter(s.in)
		if s.wantType == "" {
			if ok {
				t.Errorf("step %d (%s %s): want nothing sent, got %s", i, s.in.Type, s.in.Object.GetMetadata().GetName(), out.Type)
			}
			continue
		}
		if !ok {
			t.Errorf("step %d (%s %s): want %s, got nothing", i, s.in.Type, s.in.Object.GetMetadata().GetName(), s.wantType)
			continue
		}
		md := out.Object.GetMetadata()
		if out.Type != s.wantType || md.GetResourceVersion() != s.wantRV || md.GetLabels()["seed"] != s.wantSeed {
			t.Errorf("step %d: want %s rv %s seed %q, got %s rv %s seed %q", i, s.wantType, s.wantRV, s.wantSeed, out.Type, md.GetResourceVersion(), md.GetLabels()["seed"])
		}
	}
}

func TestVisibilityWatch(t *testing.T) {
	lastVisible := secretAt("x", "2", "a")
	runSteps(t, newVisibility(visibleToA, ""), []step{
		{in: store.Event{Type: store.Added, Object: secretAt("x", "1", "a")}, wantType: store.Added, wantRV: "1", wantSeed: "a"},
		{in: store.Event{Type: store.Added, Object: secretAt("y", "1", "b")}},
		{in: store.Event{Type: store.Modified, Object: lastVisible}, wantType: store.Modified, wantRV: "2", wantSeed: "a"},
		// x stops being visible: DELETED once, with its last visible state at the event's version.
		{in: store.Event{Type: store.Modified, Object: secretAt("x", "3", "b")}, wantType: store.Deleted, wantRV: "3", wantSeed: "a"},
		{in: store.Event{Type: store.Modified, Object: secretAt("x", "4", "b")}},
		{in: store.Event{Type: store.Deleted, Object: secretAt("x", "5", "b")}},
		// y becomes visible: ADDED.
		{in: store.Event{Type: store.Modified, Object: secretAt("y", "6", "a")}, wantType: store.Added, wantRV: "6", wantSeed: "a"},
		{in: store.Event{Type: store.Deleted, Object: secretAt("y", "7", "a")}, wantType: store.Deleted, wantRV: "7", wantSeed: "a"},
		// A deletion after the object stopped being visible is not sent again.
		{in: store.Event{Type: store.Added, Object: secretAt("z", "8", "a")}, wantType: store.Added, wantRV: "8", wantSeed: "a"},
		{in: store.Event{Type: store.Modified, Object: secretAt("z", "9", "b")}, wantType: store.Deleted, wantRV: "9", wantSeed: "a"},
		{in: store.Event{Type: store.Deleted, Object: secretAt("z", "10", "b")}},
		{in: store.Event{Type: store.Bookmark, Object: secretAt("", "11", "")}, wantType: store.Bookmark, wantRV: "11"},
	})
	if lastVisible.GetMetadata().GetResourceVersion() != "2" {
		t.Error("the filter modified a cached object")
	}
}

func TestVisibilityResumedWatch(t *testing.T) {
	runSteps(t, newVisibility(visibleToA, "42"), []step{
		// The client may hold x already: its type is kept.
		{in: store.Event{Type: store.Modified, Object: secretAt("x", "43", "a")}, wantType: store.Modified, wantRV: "43", wantSeed: "a"},
		{in: store.Event{Type: store.Modified, Object: secretAt("y", "44", "b")}},
		{in: store.Event{Type: store.Deleted, Object: secretAt("w", "45", "a")}, wantType: store.Deleted, wantRV: "45", wantSeed: "a"},
		{in: store.Event{Type: store.Deleted, Object: secretAt("v", "46", "b")}},
		{in: store.Event{Type: store.Modified, Object: secretAt("x", "47", "b")}, wantType: store.Deleted, wantRV: "47", wantSeed: "a"},
	})
}

func TestVisibilityUnfiltered(t *testing.T) {
	v := newVisibility(nil, "")
	ev := store.Event{Type: store.Modified, Object: secretAt("y", "1", "b")}
	if out, ok := v.filter(ev); !ok || out.Type != store.Modified {
		t.Errorf("without a filter everything passes as is, got %v %v", out.Type, ok)
	}
}
