package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/test/gardenerexamples"
	"github.com/trellis-dev/trellis/test/timescale"
)

func TestHistory(t *testing.T) {
	h := history{capacity: 3}
	h.reset(10)
	if evs, ok := h.since(10); !ok || len(evs) != 0 {
		t.Fatalf("empty history since its start: %v %v", evs, ok)
	}
	if _, ok := h.since(9); ok {
		t.Fatal("resume from before the start allowed")
	}
	for _, rev := range []int64{11, 12, 12, 13, 14} {
		h.add(event{rev: rev, key: "k"})
	}
	// Kept: 12, 13, 14 (the first 12 is gone, so resuming from 11 would lose it).
	if h.oldest != 12 {
		t.Fatalf("oldest %d, want 12", h.oldest)
	}
	if _, ok := h.since(11); ok {
		t.Fatal("resume from 11 allowed after an event at 12 was evicted")
	}
	evs, ok := h.since(12)
	if !ok || len(evs) != 2 || evs[0].rev != 13 || evs[1].rev != 14 {
		t.Fatalf("since 12: %v %v", evs, ok)
	}
	if evs, ok := h.since(20); !ok || len(evs) != 0 {
		t.Fatalf("since 20: %v %v", evs, ok)
	}
}

func TestTransformer(t *testing.T) {
	a := Key{Name: "a", Secret: bytes.Repeat([]byte{1}, 32)}
	b := Key{Name: "b", Secret: bytes.Repeat([]byte{2}, 32)}
	ta, _ := newTransformer([]Key{a})
	tba, _ := newTransformer([]Key{b, a})
	tb, _ := newTransformer([]Key{b})
	sealed, err := ta.seal("/k1", []byte("plain"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(sealed, []byte("trellis:enc:aesgcm:v1:a:")) || bytes.Contains(sealed, []byte("plain")) {
		t.Fatalf("sealed %q", sealed)
	}
	for _, tr := range []*transformer{ta, tba} {
		if got, err := tr.open("/k1", sealed); err != nil || string(got) != "plain" {
			t.Fatalf("open: %q %v", got, err)
		}
	}
	if _, err := tb.open("/k1", sealed); err == nil || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("open without the key: %v", err)
	}
	if _, err := ta.open("/k2", sealed); err == nil {
		t.Fatal("value opened under another key path")
	}
	if got, err := tb.open("/k1", []byte("legacy")); err != nil || string(got) != "legacy" {
		t.Fatalf("plaintext: %q %v", got, err)
	}
	sealed2, _ := ta.seal("/k1", []byte("plain"))
	if bytes.Equal(sealed, sealed2) {
		t.Fatal("nonce reused")
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	if _, err := ta.open("/k1", tampered); err == nil {
		t.Fatal("tampered value opened")
	}
}

func TestConfigValidate(t *testing.T) {
	for name, c := range map[string]Config{
		"no data dir":      {},
		"short key":        {DataDir: "x", EncryptionKeys: []Key{{Name: "a", Secret: []byte("short")}}},
		"key name":         {DataDir: "x", EncryptionKeys: []Key{{Name: "a:b", Secret: make([]byte, 32)}}},
		"duplicate key":    {DataDir: "x", EncryptionKeys: []Key{{Name: "a", Secret: make([]byte, 32)}, {Name: "a", Secret: make([]byte, 32)}}},
		"public listen":    {DataDir: "x", EtcdListen: "http://0.0.0.0:2379"},
		"listen, external": {Endpoints: []string{"http://127.0.0.1:2379"}, EtcdListen: "http://127.0.0.1:2379"},
	} {
		c.setDefaults()
		if err := c.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for _, c := range []Config{
		{DataDir: "x"},
		{DataDir: "x", EtcdListen: "http://127.0.0.1:2379"},
		{DataDir: "x", EtcdListen: "unix:///tmp/etcd.sock"},
		{Endpoints: []string{"https://etcd:2379"}},
	} {
		c.setDefaults()
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	c := Config{DataDir: "x", Prefix: "custom/"}
	c.setDefaults()
	if c.Prefix != "/custom" || c.WatchWindow != DefaultWatchWindow || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
}

// TestRelist checks the path taken when the cache's watch revision was compacted: the state is reloaded and the
// watchers, whose history is gone, end with Expired.
func TestRelist(t *testing.T) {
	s, c := openTestStore(t, t.TempDir())
	defer s.Close()
	obj, err := c.Create(t.Context(), newTestObject("a"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(t.Context(), "", WatchOptions{ResourceVersion: obj.GetMetadata().GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Changed behind the cache's back, as if the events were lost to a compaction.
	if _, err := s.client.Put(t.Context(), c.prefix+"b", string(mustEncode(t, c, "b"))); err != nil {
		t.Fatal(err)
	}
	if err := c.cache.list(t.Context()); err != nil {
		t.Fatal(err)
	}
	for ev := range w.Events() {
		if ev.Type == Error {
			if !apierrors.IsResourceExpired(ev.Err) {
				t.Fatalf("error %v", ev.Err)
			}
			break
		}
	}
	select {
	case _, ok := <-w.Events():
		if ok {
			t.Fatal("event after the error")
		}
	case <-time.After(timescale.Scale(5 * time.Second)):
		t.Fatal("watcher not closed")
	}
	if _, err := c.Get(t.Context(), "", "b"); err != nil {
		t.Fatalf("object written behind the cache's back: %v", err)
	}
	// The cache keeps following etcd.
	if _, err := c.Create(t.Context(), newTestObject("c")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(t.Context(), "", "c"); err != nil {
		t.Fatal(err)
	}
}

// openTestStore opens a store on dir with testResource registered.
func openTestStore(t *testing.T, dir string) (*Store, *Collection) {
	t.Helper()
	s, err := Open(t.Context(), Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Register(t.Context(), testResource())
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s, c
}

func testResource() Resource {
	return Resource{Resource: "namespaces", New: func() Object { return &kcorev1.Namespace{} }}
}

func newTestObject(name string) *kcorev1.Namespace {
	return &kcorev1.Namespace{Metadata: &metav1.ObjectMeta{Name: name}}
}

func mustEncode(t *testing.T, c *Collection, name string) []byte {
	t.Helper()
	b, err := c.encode(c.prefix+name, newTestObject(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// historySteps creates namespace "a" and labels it step=0, then step=1; it returns the revision before the create.
func historySteps(t *testing.T, c *Collection) int64 {
	t.Helper()
	before := c.cache.rev.Load()
	obj, err := c.Create(t.Context(), newTestObject("a"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		next := clone(obj).(*kcorev1.Namespace)
		next.Metadata.Labels = map[string]string{"step": strconv.Itoa(i)}
		if obj, err = c.Update(t.Context(), next); err != nil {
			t.Fatal(err)
		}
	}
	waitCache(t, c, obj.GetMetadata().GetResourceVersion())
	return before
}

// waitCache waits until the collection's cache has applied the revision rv.
func waitCache(t *testing.T, c *Collection, rv string) {
	t.Helper()
	rev, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(timescale.Scale(10 * time.Second)); c.cache.rev.Load() < rev; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cache did not reach revision %d", rev)
		}
	}
}

// checkHistoryStates: the history holds the newest state as the cache's own object and every superseded state
// encoded only, each at the revision its event wrote.
func checkHistoryStates(t *testing.T, c *Collection) {
	t.Helper()
	c.cache.mu.RLock()
	defer c.cache.mu.RUnlock()
	h := &c.cache.history
	if len(h.buf) != 3 {
		t.Fatalf("the history holds %d events, want 3", len(h.buf))
	}
	for i := range 2 {
		if e := h.at(i); e.obj != nil || e.objEnc.value == nil || e.objEnc.rev != e.rev {
			t.Fatalf("event %d: superseded state decoded %v, encoded at revision %d (event's %d)", i, e.obj != nil, e.objEnc.rev, e.rev)
		}
	}
	for i := 1; i < 3; i++ {
		if e := h.at(i); e.prev != nil || e.prevEnc.rev != h.at(i-1).rev {
			t.Fatalf("event %d: previous state decoded %v, encoded at revision %d, want %d", i, e.prev != nil, e.prevEnc.rev, h.at(i-1).rev)
		}
	}
	if h.at(2).obj != c.cache.items["a"].obj {
		t.Fatal("the newest event's object is not the cache's")
	}
}

// checkReplay: a watch from before the create replays the three states with their labels and resourceVersions, and
// a watch for step=0 sees the object leave its selection as DELETED with the step=0 state at the leaving revision.
func checkReplay(t *testing.T, c *Collection, from int64) {
	t.Helper()
	revs := make([]int64, 3)
	c.cache.mu.RLock()
	for i := range revs {
		revs[i] = c.cache.history.at(i).rev
	}
	c.cache.mu.RUnlock()
	next := func(w Watcher) Event {
		t.Helper()
		select {
		case ev := <-w.Events():
			return ev
		case <-time.After(timescale.Scale(10 * time.Second)):
			t.Fatal("no event")
		}
		return Event{}
	}
	w, err := c.Watch(t.Context(), "", WatchOptions{ResourceVersion: strconv.FormatInt(from, 10)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i, want := range []struct {
		typ  EventType
		step string
	}{{Added, ""}, {Modified, "0"}, {Modified, "1"}} {
		ev := next(w)
		md := ev.Object.GetMetadata()
		if ev.Type != want.typ || md.GetLabels()["step"] != want.step || md.GetResourceVersion() != strconv.FormatInt(revs[i], 10) {
			t.Fatalf("replayed event %d: %s step=%q at %s, want %s step=%q at %d", i, ev.Type, md.GetLabels()["step"], md.GetResourceVersion(), want.typ, want.step, revs[i])
		}
	}
	sel, err := labels.Parse("step=0")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := c.Watch(t.Context(), "", WatchOptions{ResourceVersion: strconv.FormatInt(from, 10), Labels: sel})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Stop()
	if ev := next(ws); ev.Type != Added || ev.Object.GetMetadata().GetLabels()["step"] != "0" {
		t.Fatalf("selected replay: %s %v, want ADDED step=0", ev.Type, ev.Object.GetMetadata().GetLabels())
	}
	if ev := next(ws); ev.Type != Deleted || ev.Object.GetMetadata().GetLabels()["step"] != "0" || ev.Object.GetMetadata().GetResourceVersion() != strconv.FormatInt(revs[2], 10) {
		t.Fatalf("selected replay: %s %v at %s, want DELETED step=0 at %d", ev.Type, ev.Object.GetMetadata().GetLabels(), ev.Object.GetMetadata().GetResourceVersion(), revs[2])
	}
}

// TestHistoryKeepsSupersededStatesEncoded: the live history holds a state decoded only while it is the cache's
// object, replays the encoded ones as they were, and a deletion leaves the last state encoded, replayed at the
// deletion's revision.
func TestHistoryKeepsSupersededStatesEncoded(t *testing.T) {
	s, c := openTestStore(t, t.TempDir())
	defer s.Close()
	from := historySteps(t, c)
	checkHistoryStates(t, c)
	checkReplay(t, c, from)

	gone, deleted, err := c.Delete(t.Context(), "", "a", nil)
	if err != nil || !deleted {
		t.Fatalf("delete: %v, %v", deleted, err)
	}
	waitCache(t, c, gone.GetMetadata().GetResourceVersion())
	c.cache.mu.RLock()
	h := &c.cache.history
	last, before := *h.at(len(h.buf) - 1), *h.at(len(h.buf) - 2)
	c.cache.mu.RUnlock()
	if last.typ != Deleted || last.obj != nil || last.prev != nil || last.objEnc.rev != last.rev || before.obj != nil {
		t.Fatalf("after the delete: newest %s decoded %v/%v at %d (event %d), the state before it decoded %v",
			last.typ, last.obj != nil, last.prev != nil, last.objEnc.rev, last.rev, before.obj != nil)
	}
	w, err := c.Watch(t.Context(), "", WatchOptions{ResourceVersion: strconv.FormatInt(before.rev, 10)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.Events():
		if md := ev.Object.GetMetadata(); ev.Type != Deleted || md.GetLabels()["step"] != "1" || md.GetResourceVersion() != strconv.FormatInt(last.rev, 10) {
			t.Fatalf("replayed deletion: %s step=%q at %s, want DELETED step=1 at %d", ev.Type, md.GetLabels()["step"], md.GetResourceVersion(), last.rev)
		}
	case <-time.After(timescale.Scale(10 * time.Second)):
		t.Fatal("no replayed deletion")
	}
}

// TestBackfillSharesObjects: a restarted store's history is kept as one filled live is: the newest state is the
// cache's own object, every superseded state encoded, and a watch from before them replays them as they were.
func TestBackfillSharesObjects(t *testing.T) {
	dir := t.TempDir()
	s, c := openTestStore(t, dir)
	from := historySteps(t, c)
	s.Close()

	s, c = openTestStore(t, dir)
	defer s.Close()
	<-c.cache.backfilled
	checkHistoryStates(t, c)
	checkReplay(t, c, from)
}

// TestContinueFromCache: continuation pages come from the watch cache, as etcd holds the snapshot: objects unchanged
// since the first page are the cache's own (their memoized encodings serve them), changed ones as they were, deleted
// ones still listed, new ones not; remainingItemCount counts the snapshot. A token whose revision the history no
// longer reaches is read from etcd, with the same pages.
func TestContinueFromCache(t *testing.T) {
	s, c := openTestStore(t, t.TempDir())
	defer s.Close()
	ctx := t.Context()
	for i := range 12 {
		if _, err := c.Create(ctx, newTestObject(fmt.Sprintf("n%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	first, err := c.List(ctx, "", ListOptions{Limit: 4})
	if err != nil || first.Continue == "" {
		t.Fatalf("first page: %v, continue %q", err, first.Continue)
	}
	// After the first page: n05 changed, n06 deleted, n07 deleted and created again, n99 created.
	cur, err := c.Get(ctx, "", "n05")
	if err != nil {
		t.Fatal(err)
	}
	next := clone(cur).(*kcorev1.Namespace)
	next.Metadata.Labels = map[string]string{"changed": "yes"}
	if _, err := c.Update(ctx, next); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n06", "n07"} {
		if _, _, err := c.Delete(ctx, "", n, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"n07", "n99"} {
		obj, err := c.Create(ctx, newTestObject(n))
		if err != nil {
			t.Fatal(err)
		}
		waitCache(t, c, obj.GetMetadata().GetResourceVersion())
	}
	pages := func() (names []string, fromCache int, remaining []int64) {
		o := ListOptions{Limit: 4, Continue: first.Continue}
		for o.Continue != "" {
			res, err := c.List(ctx, "", o)
			if err != nil {
				t.Fatal(err)
			}
			if res.ResourceVersion != first.ResourceVersion {
				t.Fatalf("page at %s, the first at %s", res.ResourceVersion, first.ResourceVersion)
			}
			for _, it := range res.Items {
				name := it.GetMetadata().GetName()
				if it.GetMetadata().GetLabels()["changed"] != "" {
					t.Errorf("%s shows a change after the snapshot", name)
				}
				c.cache.mu.RLock()
				if e := c.cache.items[name]; e != nil && e.obj == it {
					fromCache++
				}
				c.cache.mu.RUnlock()
				names = append(names, name)
			}
			if res.RemainingItemCount != nil {
				remaining = append(remaining, *res.RemainingItemCount)
			}
			o.Continue = res.Continue
		}
		return names, fromCache, remaining
	}
	want := []string{"n04", "n05", "n06", "n07", "n08", "n09", "n10", "n11"}
	names, fromCache, remaining := pages()
	if !slices.Equal(names, want) || !slices.Equal(remaining, []int64{4}) {
		t.Fatalf("pages %v remaining %v, want %v and [4]", names, remaining, want)
	}
	if fromCache != 5 { // n04, n08–n11: unchanged since the snapshot
		t.Fatalf("%d of the pages' objects are the cache's, want the 5 unchanged ones", fromCache)
	}
	// The history no longer reaching the snapshot (as after a relist): etcd serves the same pages.
	c.cache.mu.Lock()
	c.cache.history.reset(c.cache.rev.Load())
	c.cache.mu.Unlock()
	names, fromCache, remaining = pages()
	if !slices.Equal(names, want) || !slices.Equal(remaining, []int64{4}) || fromCache != 0 {
		t.Fatalf("from etcd: pages %v remaining %v (%d objects the cache's), want %v and [4]", names, remaining, fromCache, want)
	}
}

// TestContinueFromCacheRandom: after random creates, updates, deletes and re-creates between a first page and the
// rest, the pages of every namespace and selector and limit show what etcd holds at the first page's revision.
func TestContinueFromCacheRandom(t *testing.T) {
	s, err := Open(t.Context(), Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.Register(t.Context(), Resource{Resource: "configmaps", Namespaced: true, New: func() Object { return &kcorev1.ConfigMap{} }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	rnd := rand.New(rand.NewPCG(1, 2))
	namespaces := []string{"ns-a", "ns-b", "ns-c"}
	obj := func(i int) *kcorev1.ConfigMap {
		return &kcorev1.ConfigMap{Metadata: &metav1.ObjectMeta{Namespace: namespaces[i%3], Name: fmt.Sprintf("cm-%02d", i),
			Labels: map[string]string{"a": strconv.Itoa(rnd.IntN(2))}}}
	}
	var last string
	for i := range 40 {
		o, err := c.Create(ctx, obj(i))
		if err != nil {
			t.Fatal(err)
		}
		last = o.GetMetadata().GetResourceVersion()
	}
	waitCache(t, c, last)
	selectors := []labels.Selector{labels.Everything(), labels.SelectorFromSet(labels.Set{"a": "1"})}
	fromCache := 0 // objects of later pages that are the cache's own: those pages came from the cache
	defer func() {
		t.Logf("%d objects of later pages were the cache's", fromCache)
		if fromCache == 0 && !t.Failed() {
			t.Error("no later page came from the cache")
		}
	}()
	for round := range 40 {
		ns := []string{"", "ns-a", "ns-b", "ns-c"}[rnd.IntN(4)]
		o := ListOptions{Limit: int64(1 + rnd.IntN(6)), Labels: selectors[rnd.IntN(2)]}
		first, err := c.List(ctx, ns, o)
		if err != nil {
			t.Fatal(err)
		}
		rev, _ := strconv.ParseInt(first.ResourceVersion, 10, 64)
		// What etcd holds at the first page's revision, in key order.
		resp, err := s.client.Get(ctx, c.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, kv := range resp.Kvs {
			x, err := c.decode(string(kv.Key), kv.Value, kv.ModRevision)
			if err != nil {
				t.Fatal(err)
			}
			if (ns == "" || x.GetMetadata().GetNamespace() == ns) && o.Labels.Matches(labels.Set(x.GetMetadata().GetLabels())) {
				want = append(want, objectKeyOf(x)+"@"+x.GetMetadata().GetResourceVersion())
			}
		}
		// Between the pages: writes to random objects.
		for range 1 + rnd.IntN(8) {
			i := rnd.IntN(45)
			cur, err := c.Get(ctx, namespaces[i%3], fmt.Sprintf("cm-%02d", i))
			var w Object
			switch {
			case apierrors.IsNotFound(err):
				w, err = c.Create(ctx, obj(i))
			case err != nil:
			case rnd.IntN(2) == 0:
				next := clone(cur).(*kcorev1.ConfigMap)
				next.Metadata.Labels = map[string]string{"a": strconv.Itoa(rnd.IntN(2))}
				w, err = c.Update(ctx, next)
			default:
				w, _, err = c.Delete(ctx, namespaces[i%3], fmt.Sprintf("cm-%02d", i), nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			last = w.GetMetadata().GetResourceVersion()
		}
		waitCache(t, c, last)
		var got []string
		res := first
		for page := 0; ; page++ {
			for _, x := range res.Items {
				got = append(got, objectKeyOf(x)+"@"+x.GetMetadata().GetResourceVersion())
				c.cache.mu.RLock()
				if e := c.cache.items[objectKeyOf(x)]; page > 0 && e != nil && e.obj == x {
					fromCache++
				}
				c.cache.mu.RUnlock()
			}
			if res.Continue == "" {
				break
			}
			o.Continue = res.Continue
			if res, err = c.List(ctx, ns, o); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d, namespace %q, %v, limit %d:\n pages %v\n etcd  %v", round, ns, o.Labels, o.Limit, got, want)
		}
	}
}

func objectKeyOf(o Object) string {
	return o.GetMetadata().GetNamespace() + "/" + o.GetMetadata().GetName()
}

// TestWithRevisionIsAShallowCopy: a DELETED event's object is the last state at the deletion's resourceVersion,
// equal to a deep copy of it with that version (unknown fields too), without changing the state or copying more
// than its metadata.
func TestWithRevisionIsAShallowCopy(t *testing.T) {
	shoot, c := exampleShoot(t)
	shoot.Metadata.ResourceVersion = "41"
	shoot.Metadata.Finalizers = []string{"gardener"}
	shoot.Metadata.ManagedFields = []*metav1.ManagedFieldsEntry{{Manager: "m", FieldsV1: &metav1.RawExtension{Raw: []byte(`{"f:spec":{}}`)}}}
	shoot.Status = &corev1beta1.ShootStatus{TechnicalId: "shoot--garden--x"}
	// A field of a newer hub, unknown to this one: kept, as a deep copy keeps it.
	shoot.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 999, protowire.BytesType), "newer"))

	before := proto.Clone(shoot)
	got := c.withRevision(shoot, 42).(*corev1beta1.Shoot)
	want := proto.Clone(shoot).(*corev1beta1.Shoot)
	want.Metadata.ResourceVersion = "42"
	if !proto.Equal(got, want) {
		t.Fatalf("withRevision:\n%v\nwant\n%v", got, want)
	}
	if !proto.Equal(shoot, before) {
		t.Fatal("withRevision changed the state it copied")
	}
	if got.Metadata == shoot.Metadata || got.Spec != shoot.Spec || got.Status != shoot.Status {
		t.Fatal("withRevision should copy the metadata only and share the rest")
	}
}

// TestHistoryTrim: trim drops the events applied before the age, wrapped or not, keeps the rest in order, gives their
// slots back and moves oldest to the newest dropped event's revision.
func TestHistoryTrim(t *testing.T) {
	h := history{capacity: 4, maxAge: time.Minute}
	h.reset(10)
	now := time.Now().UnixNano()
	for i := range 6 { // events 11..16, applied a minute apart; the ring wraps after 4
		h.add(event{key: "k", rev: int64(11 + i), at: now - int64(6-i)*int64(time.Minute)})
	}
	if h.oldest != 12 || len(h.buf) != 4 || h.start != 2 {
		t.Fatalf("before the trim: oldest %d, %d events, start %d", h.oldest, len(h.buf), h.start)
	}
	h.trim(now - int64(time.Minute)) // events 13 and 14 were applied more than a minute before that, 15 and 16 not
	if h.oldest != 14 || len(h.buf) != 2 || cap(h.buf) != 2 || h.start != 0 || h.at(0).rev != 15 || h.at(1).rev != 16 {
		t.Fatalf("after the trim: oldest %d, events %v, start %d", h.oldest, h.buf, h.start)
	}
	if _, ok := h.since(13); ok {
		t.Fatal("resumed from before the dropped events")
	}
	if evs, ok := h.since(14); !ok || len(evs) != 2 {
		t.Fatalf("from the newest dropped event's revision: %d events, %v", len(evs), ok)
	}
	h.add(event{key: "k", rev: 17, at: now})
	h.trim(now - int64(time.Minute))
	if h.oldest != 14 || len(h.buf) != 3 || h.at(2).rev != 17 {
		t.Fatalf("nothing to trim: oldest %d, %d events", h.oldest, len(h.buf))
	}
	h.trim(now + int64(2*time.Minute))
	if h.oldest != 17 || len(h.buf) != 0 {
		t.Fatalf("everything trimmed: oldest %d, %d events", h.oldest, len(h.buf))
	}
	if _, ok := h.since(17); !ok {
		t.Fatal("no resumption from the newest revision")
	}
}

// BenchmarkWritable: what a write's copy of a shoot costs, deep (writable without shared) or of its metadata alone
// (with shared, a request WithEncodedAnswer), on Gardener's example shoot with 8 KB of managed fields.
func BenchmarkWritable(b *testing.B) {
	shoot, c := exampleShoot(b)
	shoot.Metadata.ManagedFields = []*metav1.ManagedFieldsEntry{{Manager: "m", FieldsV1: &metav1.RawExtension{Raw: []byte(`{"f:spec":{` + strings.Repeat(`"f:x":{},`, 900) + `"f:y":{}}}`)}}}
	for _, shared := range []bool{false, true} {
		b.Run(fmt.Sprintf("shared=%v", shared), func(b *testing.B) {
			for b.Loop() {
				_, m := c.writable(shared, shoot)
				m.Generation++
			}
		})
	}
}

// exampleShoot is Gardener's example shoot, and a shoots collection of a store that the test closes.
func exampleShoot(tb testing.TB) (*corev1beta1.Shoot, *Collection) {
	tb.Helper()
	y, err := os.ReadFile(filepath.Join(gardenerexamples.Dir(tb), "90-shoot.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	j, err := kjson.YAMLToJSON(y)
	if err != nil {
		tb.Fatal(err)
	}
	shoot := &corev1beta1.Shoot{}
	if err := (kjson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(j, shoot); err != nil {
		tb.Fatal(err)
	}
	s, err := Open(tb.Context(), Config{DataDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	c, err := s.Register(tb.Context(), Resource{Group: "core.gardener.cloud", Resource: "shoots", Namespaced: true,
		New: func() Object { return &corev1beta1.Shoot{} }})
	if err != nil {
		tb.Fatal(err)
	}
	return shoot, c
}
