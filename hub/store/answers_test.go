package store

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/timescale"
)

// countingEncoder encodes a namespace as its resourceVersion and labels, counting its calls.
type countingEncoder struct{ calls atomic.Int32 }

func (e *countingEncoder) encode(o Object) ([]byte, error) {
	e.calls.Add(1)
	ns := o.(*kcorev1.Namespace)
	var b strings.Builder
	b.WriteString(ns.GetMetadata().GetResourceVersion())
	for k, v := range ns.GetMetadata().GetLabels() {
		b.WriteString(" " + k + "=" + v)
	}
	return []byte(b.String()), nil
}

// holdApply makes c's cache wait before it applies the next batch of events, until the returned func is called.
func holdApply(c *Collection) (release func()) {
	gate := make(chan struct{})
	var once sync.Once
	f := func() { <-gate }
	c.cache.beforeApply.Store(&f)
	return func() {
		once.Do(func() {
			c.cache.beforeApply.Store(nil)
			close(gate)
		})
	}
}

// TestEncodedAnswerIsTheWrittenState: the result of a write WithEncodedAnswer, encoded for its answer, is the
// written state's memoized encoding, whether the answer is encoded before the cache applies the write or after;
// nothing else shares it.
func TestEncodedAnswerIsTheWrittenState(t *testing.T) {
	s, c := openTestStore(t, t.TempDir())
	defer s.Close()
	ctx := WithEncodedAnswer(t.Context())

	t.Run("answer first", func(t *testing.T) {
		var enc countingEncoder
		release := holdApply(c)
		defer release()
		created, err := c.Create(ctx, newTestObject("first"))
		if err != nil {
			t.Fatal(err)
		}
		answer, err := c.CachedEncoding(created, enc.encode)
		if err != nil {
			t.Fatal(err)
		}
		release()
		cached, err := c.Get(t.Context(), "", "first")
		if err != nil {
			t.Fatal(err)
		}
		if cached == created {
			t.Fatal("the cache holds the write's result itself")
		}
		got, _ := c.CachedEncoding(cached, enc.encode)
		if string(got) != string(answer) || enc.calls.Load() != 1 {
			t.Fatalf("cached state encoded as %q after the answer %q, %d encodings; want the answer's, one", got, answer, enc.calls.Load())
		}
		if m := c.MemoizedEncoding("", "first", created.GetMetadata().GetResourceVersion()); string(m) != string(answer) {
			t.Fatalf("memoized encoding %q, want the answer's %q", m, answer)
		}
	})

	t.Run("cache first", func(t *testing.T) {
		var enc countingEncoder
		created, err := c.Create(ctx, newTestObject("second"))
		if err != nil {
			t.Fatal(err)
		}
		waitCache(t, c, created.GetMetadata().GetResourceVersion())
		cached, _ := c.Get(t.Context(), "", "second")
		if m := c.MemoizedEncoding("", "second", created.GetMetadata().GetResourceVersion()); m != nil {
			t.Fatalf("memoized encoding %q before any was made", m)
		}
		answer, _ := c.CachedEncoding(created, enc.encode)
		got, _ := c.CachedEncoding(cached, enc.encode)
		if string(got) != string(answer) || enc.calls.Load() != 1 {
			t.Fatalf("cached state encoded as %q after the answer %q, %d encodings; want the answer's, one", got, answer, enc.calls.Load())
		}
	})

	t.Run("the cache applied the write while it was remembered", func(t *testing.T) {
		// The cache looks for the write's answer before the write remembers it, and moves its revision after.
		var enc countingEncoder
		f := func() {
			for deadline := time.Now().Add(300 * time.Millisecond); c.answers.n.Load() == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}
		c.cache.whileApplying.Store(&f)
		created, err := c.Create(ctx, newTestObject("raced"))
		c.cache.whileApplying.Store(nil)
		if err != nil {
			t.Fatal(err)
		}
		waitCache(t, c, created.GetMetadata().GetResourceVersion())
		cached, _ := c.Get(t.Context(), "", "raced")
		answer, _ := c.CachedEncoding(created, enc.encode)
		got, _ := c.CachedEncoding(cached, enc.encode)
		if string(got) != string(answer) || enc.calls.Load() != 1 {
			t.Fatalf("cached state encoded as %q after the answer %q, %d encodings; want the answer's, one", got, answer, enc.calls.Load())
		}
		if n := c.answers.n.Load(); n != 0 {
			t.Fatalf("%d answers kept after the cache applied their writes", n)
		}
	})

	t.Run("read first", func(t *testing.T) {
		var enc countingEncoder
		created, err := c.Create(ctx, newTestObject("third"))
		if err != nil {
			t.Fatal(err)
		}
		cached, _ := c.Get(t.Context(), "", "third")
		read, _ := c.CachedEncoding(cached, enc.encode) // a watcher's or a list's
		answer, _ := c.CachedEncoding(created, enc.encode)
		if string(read) != string(answer) || enc.calls.Load() != 1 {
			t.Fatalf("answer %q after the read %q, %d encodings; want the read's, one", answer, read, enc.calls.Load())
		}
	})

	t.Run("update, the cache applied the write before it was remembered", func(t *testing.T) {
		var enc countingEncoder
		cur, _ := c.Get(t.Context(), "", "second")
		next := clone(cur).(*kcorev1.Namespace)
		next.Metadata.Labels = map[string]string{"step": "1"}
		updated, err := c.Update(t.Context(), next) // not marked: remembered below, as a write is that the cache outran
		if err != nil {
			t.Fatal(err)
		}
		rv := updated.GetMetadata().GetResourceVersion()
		waitCache(t, c, rv)
		c.answered("second", revisionOf(updated), updated)
		answer, _ := c.CachedEncoding(updated, enc.encode)
		cached, _ := c.Get(t.Context(), "", "second")
		got, _ := c.CachedEncoding(cached, enc.encode)
		if string(got) != string(answer) || !strings.Contains(string(got), "step=1") || enc.calls.Load() != 1 {
			t.Fatalf("cached state %q, answer %q, %d encodings; want the answer's, one", got, answer, enc.calls.Load())
		}
		if c.answers.n.Load() != 0 {
			t.Fatalf("%d answers left after the cache applied their writes", c.answers.n.Load())
		}
	})

	t.Run("deletion", func(t *testing.T) {
		created, err := c.Create(t.Context(), newTestObject("deleted"))
		if err != nil {
			t.Fatal(err)
		}
		cached, _ := c.Get(t.Context(), "", "deleted")
		rv := cached.GetMetadata().GetResourceVersion()
		out, deleted, err := c.Delete(ctx, "", "deleted", nil)
		if err != nil || !deleted {
			t.Fatalf("delete: %v, deleted %v", err, deleted)
		}
		if cached.GetMetadata().GetResourceVersion() != rv {
			t.Fatalf("the deletion's answer changed the cached state's resourceVersion to %s", cached.GetMetadata().GetResourceVersion())
		}
		if revisionOf(out) <= revisionOf(created) {
			t.Fatalf("deletion answered at resourceVersion %s, the state was at %s", out.GetMetadata().GetResourceVersion(), rv)
		}
		want := clone(cached)
		want.GetMetadata().ResourceVersion = out.GetMetadata().GetResourceVersion()
		if !proto.Equal(out, want) {
			t.Fatalf("deletion answered %v, want the last state %v", out, want)
		}
	})

	t.Run("relist", func(t *testing.T) {
		// An answer whose write a relist took in (not an event) is not kept: the relist forgets every answer.
		c.answers.put("never-applied", c.cache.rev.Load()+1000, newTestObject("never-applied").GetMetadata())
		if err := c.cache.list(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := c.answers.n.Load(); n != 0 {
			t.Fatalf("%d answers kept after a relist", n)
		}
	})

	t.Run("what is not the answer", func(t *testing.T) {
		var enc countingEncoder
		// Not marked: the result is encoded as itself, the cached state on its own.
		plain, err := c.Create(t.Context(), newTestObject("plain"))
		if err != nil {
			t.Fatal(err)
		}
		cached, _ := c.Get(t.Context(), "", "plain")
		_, _ = c.CachedEncoding(plain, enc.encode)
		_, _ = c.CachedEncoding(cached, enc.encode)
		if enc.calls.Load() != 2 {
			t.Fatalf("%d encodings of an unmarked write's result and its cached state, want 2", enc.calls.Load())
		}

		created, err := c.Create(ctx, newTestObject("marked"))
		if err != nil {
			t.Fatal(err)
		}
		cached, _ = c.Get(t.Context(), "", "marked")
		answer, _ := c.CachedEncoding(cached, enc.encode)
		// Another object at the same version (a copy changed by a caller) is encoded as what it is.
		changed := clone(created).(*kcorev1.Namespace)
		changed.Metadata.Labels = map[string]string{"changed": "yes"}
		if got, _ := c.CachedEncoding(changed, enc.encode); !strings.Contains(string(got), "changed=yes") {
			t.Fatalf("a changed copy of the result encoded as %q (the answer is %q)", got, answer)
		}
		// Another message sharing the result's metadata (a conversion to another version) is not the state either.
		converted := &kcorev1.Secret{Metadata: created.GetMetadata()}
		calls := enc.calls.Load()
		if got, err := c.CachedEncoding(converted, func(Object) ([]byte, error) { enc.calls.Add(1); return []byte("secret"), nil }); err != nil || string(got) != "secret" {
			t.Fatalf("another kind sharing the result's metadata encoded as %q, %v", got, err)
		}
		if enc.calls.Load() != calls+1 {
			t.Fatal("another kind sharing the result's metadata was not encoded")
		}
	})
}

// reviseCounted revises countingEncoder's encoding (the resourceVersion first), counting its calls.
func reviseCounted(calls *atomic.Int32) func([]byte, string) ([]byte, bool) {
	return func(data []byte, rv string) ([]byte, bool) {
		calls.Add(1)
		_, rest, _ := strings.Cut(string(data), " ")
		if rest != "" {
			rest = " " + rest
		}
		return []byte(rv + rest), true
	}
}

// TestDeletionAnswerIsTheDeletedStateRevised: a deletion WithEncodedAnswer answers the deleted state's memoized
// encoding revised to the deletion's resourceVersion (Resource.Revised), also when the cache applied the deletion
// first; without a memoized encoding, or for another kind sharing the result's metadata, the result is encoded as
// it is. A result whose answer is never encoded leaves nothing behind.
func TestDeletionAnswerIsTheDeletedStateRevised(t *testing.T) {
	s, err := Open(t.Context(), Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var revisions atomic.Int32
	res := testResource()
	res.Revised = reviseCounted(&revisions)
	c, err := s.Register(t.Context(), res)
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithEncodedAnswer(t.Context())
	// deleteEncoded creates name with a label, encodes its cached state when memo is set, and deletes it.
	deleteEncoded := func(t *testing.T, name string, memo bool, enc *countingEncoder) Object {
		t.Helper()
		obj := newTestObject(name)
		obj.Metadata.Labels = map[string]string{"name": name}
		created, err := c.Create(t.Context(), obj)
		if err != nil {
			t.Fatal(err)
		}
		waitCache(t, c, created.GetMetadata().GetResourceVersion())
		if memo {
			cached, _ := c.Get(t.Context(), "", name)
			if _, err := c.CachedEncoding(cached, enc.encode); err != nil {
				t.Fatal(err)
			}
		}
		out, deleted, err := c.Delete(ctx, "", name, nil)
		if err != nil || !deleted {
			t.Fatalf("delete %s: %v, deleted %v", name, err, deleted)
		}
		return out
	}
	want := func(obj Object) string {
		var enc countingEncoder
		b, _ := enc.encode(obj)
		return string(b)
	}

	t.Run("memoized, the cache applied the deletion first", func(t *testing.T) {
		var enc countingEncoder
		revisions.Store(0)
		out := deleteEncoded(t, "memoized", true, &enc)
		waitCache(t, c, out.GetMetadata().GetResourceVersion())
		if e, _ := c.cache.entry("", "memoized"); e != nil {
			t.Fatal("the cache still holds the deleted object")
		}
		got, err := c.CachedEncoding(out, enc.encode)
		if err != nil || string(got) != want(out) {
			t.Fatalf("deletion answered %q, %v; want %q", got, err, want(out))
		}
		if enc.calls.Load() != 1 || revisions.Load() != 1 {
			t.Fatalf("%d encodings and %d revisions; want the state's one encoding, revised once", enc.calls.Load(), revisions.Load())
		}
		if n := c.deletions.n.Load(); n != 0 {
			t.Fatalf("%d deletions kept after their answer", n)
		}
		// A second encoding of the same result (none is made by the gateway) is a new one.
		if got, _ := c.CachedEncoding(out, enc.encode); string(got) != want(out) || enc.calls.Load() != 2 {
			t.Fatalf("encoded again as %q after %d encodings", got, enc.calls.Load())
		}
	})

	t.Run("not memoized", func(t *testing.T) {
		var enc countingEncoder
		revisions.Store(0)
		out := deleteEncoded(t, "unread", false, &enc)
		if got, _ := c.CachedEncoding(out, enc.encode); string(got) != want(out) || enc.calls.Load() != 1 || revisions.Load() != 0 {
			t.Fatalf("deletion answered %q after %d encodings, %d revisions; want %q, encoded", got, enc.calls.Load(), revisions.Load(), want(out))
		}
	})

	t.Run("another kind sharing the result's metadata", func(t *testing.T) {
		var enc countingEncoder
		out := deleteEncoded(t, "converted", true, &enc)
		converted := &kcorev1.Secret{Metadata: out.GetMetadata()}
		if got, _ := c.CachedEncoding(converted, func(Object) ([]byte, error) { return []byte("secret"), nil }); string(got) != "secret" {
			t.Fatalf("another kind sharing a deletion's metadata encoded as %q", got)
		}
		if got, _ := c.CachedEncoding(out, enc.encode); string(got) != want(out) || enc.calls.Load() != 1 {
			t.Fatalf("deletion answered %q after %d encodings, want %q from the state's", got, enc.calls.Load(), want(out))
		}
	})

	t.Run("not marked", func(t *testing.T) {
		var enc countingEncoder
		created, err := c.Create(t.Context(), newTestObject("plain"))
		if err != nil {
			t.Fatal(err)
		}
		waitCache(t, c, created.GetMetadata().GetResourceVersion())
		cached, _ := c.Get(t.Context(), "", "plain")
		_, _ = c.CachedEncoding(cached, enc.encode)
		if _, _, err := c.Delete(t.Context(), "", "plain", nil); err != nil {
			t.Fatal(err)
		}
		if n := c.deletions.n.Load(); n != 0 {
			t.Fatalf("%d deletions kept for an unmarked request", n)
		}
	})

	t.Run("answer never encoded", func(t *testing.T) {
		var enc countingEncoder
		_ = deleteEncoded(t, "dropped", true, &enc)
		if c.deletions.n.Load() != 1 {
			t.Fatalf("%d deletions kept, want the one just made", c.deletions.n.Load())
		}
		for deadline := time.Now().Add(timescale.Scale(10 * time.Second)); c.deletions.n.Load() != 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("a deletion's record outlived its result")
			}
			runtime.GC()
		}
	})
}

// TestMarkAnsweredEncodedCopiesTheMetadataOnly: a deletion that marks an object held by finalizers writes and
// returns, for a request WithEncodedAnswer, a copy of the metadata sharing the rest with the cached state, and leaves
// that state as it was; without the marker the result is a deep copy. Both marks store the same state.
func TestMarkAnsweredEncodedCopiesTheMetadataOnly(t *testing.T) {
	s, c := openTestStore(t, t.TempDir())
	defer s.Close()
	held := func(name string) Object {
		obj := newTestObject(name)
		obj.Metadata.Finalizers = []string{"example.com/hold"}
		obj.Metadata.Labels = map[string]string{"team": "a"}
		obj.Spec = &kcorev1.NamespaceSpec{Finalizers: []string{"kubernetes"}}
		created, err := c.Create(t.Context(), obj)
		if err != nil {
			t.Fatal(err)
		}
		waitCache(t, c, created.GetMetadata().GetResourceVersion())
		cached, err := c.Get(t.Context(), "", name)
		if err != nil {
			t.Fatal(err)
		}
		return cached
	}
	mark := func(ctx context.Context, name string) (cached, before, marked *kcorev1.Namespace) {
		cur := held(name)
		before = proto.Clone(cur).(*kcorev1.Namespace)
		out, deleted, err := c.Delete(ctx, "", name, nil)
		if err != nil || deleted {
			t.Fatalf("delete %s: deleted %v, %v; want a mark", name, deleted, err)
		}
		return cur.(*kcorev1.Namespace), before, out.(*kcorev1.Namespace)
	}

	cached, before, marked := mark(WithEncodedAnswer(t.Context()), "answered")
	if !proto.Equal(cached, before) {
		t.Fatalf("the mark changed the cached state:\n%v\nwas\n%v", cached, before)
	}
	if marked.Metadata == cached.Metadata || marked.Spec != cached.Spec {
		t.Fatal("the answered mark should copy the metadata only and share the rest with the cached state")
	}
	md := marked.GetMetadata()
	if md.GetDeletionTimestamp() == nil || md.GetDeletionGracePeriodSeconds() != 0 || md.GetGeneration() != before.GetMetadata().GetGeneration()+1 ||
		md.GetResourceVersion() == before.GetMetadata().GetResourceVersion() {
		t.Fatalf("marked metadata %v", md)
	}
	waitCache(t, c, md.GetResourceVersion())
	stored, _ := c.Get(t.Context(), "", "answered")
	if !proto.Equal(stored, marked) {
		t.Fatalf("stored\n%v\nanswered\n%v", stored, marked)
	}

	plainCached, plainBefore, plainMarked := mark(t.Context(), "plain")
	if !proto.Equal(plainCached, plainBefore) || plainMarked.Spec == plainCached.Spec || plainMarked.Metadata.Labels == nil {
		t.Fatal("a mark without the marker should be a deep copy of the cached state")
	}
	// The same mark either way, but for the names, uids and times the two objects differ in.
	for _, m := range []*kcorev1.Namespace{marked, plainMarked} {
		m := m.GetMetadata()
		m.Name, m.Uid, m.ResourceVersion, m.CreationTimestamp, m.DeletionTimestamp = "", "", "", nil, nil
	}
	if !proto.Equal(marked, plainMarked) {
		t.Fatalf("answered mark\n%v\nplain mark\n%v", marked, plainMarked)
	}
}

// answering is the context of a write WithEncodedAnswer when answered is set, else a plain one, and the name of the
// object it writes.
func answering(t *testing.T, answered bool) (context.Context, string) {
	if answered {
		return WithEncodedAnswer(t.Context()), "answered"
	}
	return t.Context(), "plain"
}

// TestCreateAnsweredEncodedCopiesTheMetadataOnly: a create WithEncodedAnswer writes and returns a copy of the request's
// metadata sharing the rest with the request, and leaves the request as it was; without the marker the result is a
// deep copy.
func TestCreateAnsweredEncodedCopiesTheMetadataOnly(t *testing.T) {
	s, c := openTestStore(t, t.TempDir())
	defer s.Close()
	for _, answered := range []bool{true, false} {
		ctx, name := answering(t, answered)
		req := newTestObject(name)
		req.Metadata.Labels = map[string]string{"team": "a"}
		req.Spec = &kcorev1.NamespaceSpec{Finalizers: []string{"kubernetes"}}
		before := proto.Clone(req)
		out, err := c.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(req, before) {
			t.Fatalf("create changed the request:\n%v\nwas\n%v", req, before)
		}
		created := out.(*kcorev1.Namespace)
		if created.Metadata == req.Metadata || created.GetMetadata().GetUid() == "" || created.GetMetadata().GetResourceVersion() == "" {
			t.Fatalf("created metadata %v", created.GetMetadata())
		}
		if shared := created.Spec == req.Spec; shared != answered {
			t.Fatalf("answered %v: the result shares the request's spec: %v", answered, shared)
		}
		waitCache(t, c, created.GetMetadata().GetResourceVersion())
		if stored, _ := c.Get(t.Context(), "", name); !proto.Equal(stored, created) {
			t.Fatalf("stored\n%v\ncreated\n%v", stored, created)
		}
	}
	// A request without metadata gets it on the copy only.
	bare := &kcorev1.Namespace{}
	if _, err := c.Create(WithEncodedAnswer(t.Context()), bare); err == nil || bare.Metadata != nil {
		t.Fatalf("a create without a name: %v, the request's metadata %v", err, bare.Metadata)
	}
}

// TestUpdateAnsweredEncodedCopiesTheMetadataOnly: an update WithEncodedAnswer (as the REST server's, whose mutate
// returns the request) writes a copy of the request's metadata sharing the rest with the request and the cached
// status, and leaves the request and the cached state as they were, also when a conflict makes it decide again;
// without the marker the result is a deep copy. A status update shares the cached object's spec and the request's
// status.
func TestUpdateAnsweredEncodedCopiesTheMetadataOnly(t *testing.T) {
	s, c := openTestStore(t, t.TempDir())
	defer s.Close()
	for _, answered := range []bool{true, false} {
		ctx, name := answering(t, answered)
		obj := newTestObject(name)
		obj.Spec = &kcorev1.NamespaceSpec{Finalizers: []string{"kubernetes"}}
		obj.Status = &kcorev1.NamespaceStatus{Phase: "Active"}
		created, err := c.Create(t.Context(), obj)
		if err != nil {
			t.Fatal(err)
		}
		req := newTestObject(name)
		req.Metadata.Labels = map[string]string{"team": "b"}
		req.Spec = &kcorev1.NamespaceSpec{Finalizers: []string{"kubernetes", "example.com/other"}}
		before := proto.Clone(req)
		calls := 0
		out, err := c.GuaranteedUpdate(ctx, "", name, false, func(cur Object) (Object, error) {
			if calls++; calls == 1 {
				// Another writer moves the object after this decision: the update decides again.
				if _, err := c.GuaranteedUpdate(t.Context(), "", name, false, func(cur Object) (Object, error) {
					cur.GetMetadata().Annotations = map[string]string{"moved": "yes"}
					return cur, nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			return req, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if calls != 2 || !proto.Equal(req, before) {
			t.Fatalf("%d decisions; the request after the update:\n%v\nwas\n%v", calls, req, before)
		}
		updated := out.(*kcorev1.Namespace)
		if updated.Metadata == req.Metadata || updated.GetMetadata().GetUid() != created.GetMetadata().GetUid() ||
			updated.GetMetadata().GetGeneration() != 2 || updated.GetStatus().GetPhase() != "Active" {
			t.Fatalf("updated %v", updated)
		}
		if shared := updated.Spec == req.Spec; shared != answered {
			t.Fatalf("answered %v: the result shares the request's spec: %v", answered, shared)
		}
		waitCache(t, c, updated.GetMetadata().GetResourceVersion())
		cached, _ := c.Get(t.Context(), "", name)
		if !proto.Equal(cached, updated) {
			t.Fatalf("stored\n%v\nupdated\n%v", cached, updated)
		}
		if shared := updated.Status == cached.(*kcorev1.Namespace).Status; shared {
			t.Fatal("the result shares the status of a state decoded after it")
		}

		cachedBefore := proto.Clone(cached)
		statusReq := proto.Clone(cached).(*kcorev1.Namespace)
		statusReq.Status = &kcorev1.NamespaceStatus{Phase: "Terminating"}
		statusReq.Metadata.ManagedFields = []*metav1.ManagedFieldsEntry{{Manager: "m", Subresource: "status"}}
		out, err = c.GuaranteedUpdate(ctx, "", name, true, func(Object) (Object, error) { return statusReq, nil })
		if err != nil {
			t.Fatal(err)
		}
		st := out.(*kcorev1.Namespace)
		if !proto.Equal(cached, cachedBefore) || st.GetStatus().GetPhase() != "Terminating" || len(st.GetMetadata().GetManagedFields()) != 1 {
			t.Fatalf("status update %v; the cached state after it %v", st, cached)
		}
		if shared := st.Spec == cached.(*kcorev1.Namespace).Spec && st.Status == statusReq.Status; shared != answered {
			t.Fatalf("answered %v: the status update shares the cached spec and the request's status: %v", answered, shared)
		}
	}
}
