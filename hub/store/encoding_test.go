package store_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func TestCachedEncodingFollowsTheCachedState(t *testing.T) {
	ctx := context.Background()
	st := storetest.NewStore(t)
	shoots, err := st.Register(ctx, storetest.Shoots())
	if err != nil {
		t.Fatal(err)
	}
	created, err := shoots.Create(ctx, storetest.NewShoot("garden-a", "s1", "seed", nil))
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	encode := func(o store.Object) ([]byte, error) {
		calls.Add(1)
		return []byte(o.GetMetadata().GetResourceVersion() + "/" + o.(*corev1beta1.Shoot).GetSpec().GetRegion()), nil
	}
	cached, _ := shoots.Get(ctx, "garden-a", "s1")
	rv := cached.GetMetadata().GetResourceVersion()
	if m := shoots.MemoizedEncoding("garden-a", "s1", rv); m != nil {
		t.Fatalf("memoized encoding %q before any was made", m)
	}
	a, _ := shoots.CachedEncoding(cached, encode)
	if m := shoots.MemoizedEncoding("garden-a", "s1", rv); string(m) != string(a) {
		t.Fatalf("memoized encoding %q, want %q", m, a)
	}
	if m := shoots.MemoizedEncoding("garden-a", "s1", "1"); m != nil {
		t.Fatalf("memoized encoding of another version: %q", m)
	}
	b, _ := shoots.CachedEncoding(cached, encode)
	if string(a) != string(b) || calls.Load() != 1 {
		t.Fatalf("cached object encoded %d times (%q, %q), want once", calls.Load(), a, b)
	}
	// The object returned by the write is not the cached one: encoded, not memoized.
	if _, err := shoots.CachedEncoding(created, encode); err != nil || calls.Load() != 2 {
		t.Fatalf("write result: %d calls, %v", calls.Load(), err)
	}
	// After an update the memo of the old state is not served for the new one.
	next := proto.Clone(cached).(*corev1beta1.Shoot)
	next.Spec.Region = "r2"
	if _, err := shoots.Update(ctx, next); err != nil {
		t.Fatal(err)
	}
	cur, _ := shoots.Get(ctx, "garden-a", "s1")
	// The memo of the replaced version is still that version's (a write deciding on a stale cache applies to it).
	if m := shoots.MemoizedEncoding("garden-a", "s1", rv); m != nil && string(m) != string(a) {
		t.Fatalf("memoized encoding of the replaced version after the update: %q, want %q", m, a)
	}
	if m := shoots.MemoizedEncoding("garden-a", "s1", cur.GetMetadata().GetResourceVersion()); m != nil {
		t.Fatalf("memoized encoding %q of the new version before any was made", m)
	}
	c, _ := shoots.CachedEncoding(cur, encode)
	if string(c) == string(a) || string(c) != cur.GetMetadata().GetResourceVersion()+"/r2" {
		t.Fatalf("after update: %q (before %q)", c, a)
	}
	// An old state still held by a reader is encoded as what it is.
	if old, _ := shoots.CachedEncoding(cached, encode); string(old) != string(a) {
		t.Fatalf("old state encoded as %q, want %q", old, a)
	}
}

func TestCachedDerivedEncodingKeepsWhatWasDerived(t *testing.T) {
	ctx := context.Background()
	st := storetest.NewStore(t)
	shoots, err := st.Register(ctx, storetest.Shoots())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shoots.Create(ctx, storetest.NewShoot("garden-a", "s1", "seed", nil)); err != nil {
		t.Fatal(err)
	}
	encode := func(o store.Object) ([]byte, error) { return []byte(o.GetMetadata().GetResourceVersion()), nil }
	var seen []any
	derive := func(data []byte, memo any) (any, bool) {
		seen = append(seen, memo)
		if memo != nil {
			return memo, false
		}
		return "derived from " + string(data), true
	}
	cached, _ := shoots.Get(ctx, "garden-a", "s1")
	a, _ := shoots.CachedDerivedEncoding(cached, encode, derive)
	b, _ := shoots.CachedDerivedEncoding(cached, encode, derive)
	want := "derived from " + cached.GetMetadata().GetResourceVersion()
	if a != want || b != want || len(seen) != 2 || seen[0] != nil || seen[1] != want {
		t.Fatalf("derived %v, %v; derive saw the memos %v", a, b, seen)
	}
	// A new version of the object starts without a memo.
	next := proto.Clone(cached).(*corev1beta1.Shoot)
	next.Spec.Region = "r2"
	if _, err := shoots.Update(ctx, next); err != nil {
		t.Fatal(err)
	}
	cur, _ := shoots.Get(ctx, "garden-a", "s1")
	seen = nil
	c, _ := shoots.CachedDerivedEncoding(cur, encode, derive)
	if c != "derived from "+cur.GetMetadata().GetResourceVersion() || len(seen) != 1 || seen[0] != nil {
		t.Fatalf("after an update: derived %v; derive saw the memos %v", c, seen)
	}
}

// TestCachedEncodingFindsEveryKey: the cache finds the entry of a cluster-scoped object, of a namespaced one, and of
// one whose key is longer than the lookup's stack buffer (a 63-character namespace and a 253-character name), and
// serving a memoized encoding allocates nothing.
func TestCachedEncodingFindsEveryKey(t *testing.T) {
	ctx := context.Background()
	st := storetest.NewStore(t)
	shoots, err := st.Register(ctx, storetest.Shoots())
	if err != nil {
		t.Fatal(err)
	}
	namespaces, err := st.Register(ctx, storetest.Namespaces())
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("n", 63)
	longName := strings.Repeat("s", 253)
	if _, err := namespaces.Create(ctx, &kcorev1.Namespace{Metadata: &metav1.ObjectMeta{Name: long}}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct{ ns, name string }{{"garden-a", "s1"}, {"garden-platform-team-31", "shoot-of-a-longer-name-00001"}, {long, longName}} {
		if _, err := shoots.Create(ctx, storetest.NewShoot(o.ns, o.name, "seed", nil)); err != nil {
			t.Fatal(err)
		}
	}
	var calls atomic.Int32
	encode := func(o store.Object) ([]byte, error) {
		calls.Add(1)
		return []byte(o.GetMetadata().GetNamespace() + "/" + o.GetMetadata().GetName()), nil
	}
	check := func(c *store.Collection, ns, name string) {
		t.Helper()
		cached, err := c.Get(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		before := calls.Load()
		a, _ := c.CachedEncoding(cached, encode)
		if allocs := testing.AllocsPerRun(100, func() { _, _ = c.CachedEncoding(cached, encode) }); allocs != 0 && len(ns)+len(name) < 100 {
			t.Errorf("%s/%s: a memoized encoding served with %v allocations", ns, name, allocs)
		}
		if calls.Load() != before+1 || string(a) != ns+"/"+name {
			t.Errorf("%s/%s: encoded %d times (%q): the cached entry was not found", ns, name, calls.Load()-before, a)
		}
		if m := c.MemoizedEncoding(ns, name, cached.GetMetadata().GetResourceVersion()); string(m) != string(a) {
			t.Errorf("%s/%s: memoized encoding %q, want %q", ns, name, m, a)
		}
	}
	check(namespaces, "", long)
	check(shoots, "garden-a", "s1")
	check(shoots, "garden-platform-team-31", "shoot-of-a-longer-name-00001")
	check(shoots, long, longName)
}
