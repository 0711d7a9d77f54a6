package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestKubectlDeleteCascade: the real kubectl's `delete --cascade=foreground` and `--cascade=orphan` against the real
// hub binary with its garbage collector. In the foreground the owner stays, marked and behind foregroundDeletion,
// while a dependent with blockOwnerDeletion is held by a finalizer of its own, and goes once it is released; an
// orphaning delete returns when the owner is gone, and its dependent stays without the owner reference.
func TestKubectlDeleteCascade(t *testing.T) {
	lightTest(t)
	_, kc, ok := startKubectlHub(t, "--controllers=garbagecollector", "--disable-scheduler")
	ok("apply", "-f", writeTemp(t, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"cascade"}}`))
	withDependent := func(owner, finalizers string) {
		ok("apply", "-f", writeTemp(t, fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"cascade"}}`, owner)))
		uid := ok("get", "configmap", owner, "-n", "cascade", "-o", "jsonpath={.metadata.uid}")
		ok("apply", "-f", writeTemp(t, fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s-dep","namespace":"cascade","finalizers":%s,
 "ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":%q,"uid":%q,"blockOwnerDeletion":true}]}}`, owner, finalizers, owner, uid)))
	}
	field := func(name, path string) string {
		t.Helper()
		return ok("get", "configmap", name, "-n", "cascade", "-o", "jsonpath={"+path+"}")
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not within 30s: %s", what)
			}
		}
	}

	withDependent("fg", `["example.com/hold"]`)
	out := ok("delete", "configmap", "fg", "-n", "cascade", "--cascade=foreground", "--wait=false")
	contains(t, "delete --cascade=foreground", out, `configmap "fg" deleted`)
	eventually("the blocking dependent is marked for deletion", func() bool { return field("fg-dep", ".metadata.deletionTimestamp") != "" })
	time.Sleep(300 * time.Millisecond) // the collector had its chance to let the owner go too early
	if f := field("fg", ".metadata.finalizers"); !strings.Contains(f, "foregroundDeletion") || field("fg", ".metadata.deletionTimestamp") == "" {
		t.Fatalf("the owner deleted in the foreground, while its blocking dependent is held: finalizers %s", f)
	}
	ok("patch", "configmap", "fg-dep", "-n", "cascade", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	ok("wait", "--for=delete", "configmap/fg", "configmap/fg-dep", "-n", "cascade", "--timeout=30s")

	withDependent("or", `[]`)
	out = ok("delete", "configmap", "or", "-n", "cascade", "--cascade=orphan", "--timeout=30s")
	contains(t, "delete --cascade=orphan", out, `configmap "or" deleted`)
	if out, err := kc("get", "configmap", "or", "-n", "cascade"); err == nil || !strings.Contains(out, "NotFound") {
		t.Fatalf("the orphaning owner after kubectl delete returned: %v %s", err, out)
	}
	if refs := field("or-dep", ".metadata.ownerReferences"); refs != "" {
		t.Errorf("the orphaned dependent keeps owner references: %s", refs)
	}
}
