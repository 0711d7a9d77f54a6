package v1alpha1

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// TestObjectKinds checks that every kind is registered under its own name and that GetExtensionSpec and
// GetExtensionStatus point into the object, so writes through them change it and survive a deep copy.
func TestObjectKinds(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, o := range ObjectKinds() {
		gvks, _, err := scheme.ObjectKinds(o)
		if err != nil || len(gvks) != 1 || gvks[0].GroupVersion() != SchemeGroupVersion {
			t.Fatalf("%T: kinds %v, %v", o, gvks, err)
		}
		kind := gvks[0].Kind
		if seen[kind] {
			t.Errorf("kind %s listed twice", kind)
		}
		seen[kind] = true
		if _, err := scheme.New(SchemeGroupVersion.WithKind(kind + "List")); err != nil {
			t.Errorf("no list kind for %s: %v", kind, err)
		}

		o.GetExtensionSpec().Type = "local"
		o.GetExtensionStatus().ObservedGeneration = 7
		c := o.DeepCopyObject().(Object)
		if c.GetExtensionSpec().Type != "local" || c.GetExtensionStatus().ObservedGeneration != 7 {
			t.Errorf("%s: writes through GetExtensionSpec/GetExtensionStatus are lost: %+v %+v", kind,
				c.GetExtensionSpec(), c.GetExtensionStatus())
		}
	}
	if len(seen) != 11 {
		t.Errorf("ObjectKinds has %d kinds, want the 11 extension kinds", len(seen))
	}
	if _, err := scheme.New(SchemeGroupVersion.WithKind("Cluster")); err != nil {
		t.Errorf("Cluster not registered: %v", err)
	}
}

func TestGetCondition(t *testing.T) {
	conds := []Condition{{Type: ShootControlPlaneHealthy}, {Type: ShootEveryNodeReady}}
	c := GetCondition(conds, ShootEveryNodeReady)
	if c == nil {
		t.Fatal("condition not found")
	}
	c.Status = ConditionTrue
	if conds[1].Status != ConditionTrue {
		t.Error("GetCondition does not point into the slice")
	}
	if GetCondition(conds, ShootAPIServerAvailable) != nil {
		t.Error("found a condition that is not there")
	}
}
