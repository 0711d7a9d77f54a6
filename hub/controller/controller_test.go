package controller_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// bound is how long a test waits for the controller to react to a change (it reacts at once; the bound leaves room
// for a loaded machine).
const bound = 10 * time.Second

// recorder is a Reconciler that records the keys it is called with and answers with what the test sets.
type recorder struct {
	mu     sync.Mutex
	calls  []controller.Key
	answer func(controller.Key, int) (controller.Result, error) // key, how many times it was called before
	signal chan controller.Key
}

func newRecorder() *recorder { return &recorder{signal: make(chan controller.Key, 100)} }

func (r *recorder) Reconcile(_ context.Context, key controller.Key) (controller.Result, error) {
	r.mu.Lock()
	n := 0
	for _, k := range r.calls {
		if k == key {
			n++
		}
	}
	r.calls = append(r.calls, key)
	answer := r.answer
	r.mu.Unlock()
	r.signal <- key
	if answer != nil {
		return answer(key, n)
	}
	return controller.Result{}, nil
}

// next waits for the next reconciliation and returns its key.
func (r *recorder) next(t *testing.T) controller.Key {
	t.Helper()
	select {
	case k := <-r.signal:
		return k
	case <-time.After(bound):
		t.Fatal("no reconciliation")
		return controller.Key{}
	}
}

// none fails when a reconciliation happens within d.
func (r *recorder) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case k := <-r.signal:
		t.Fatalf("unexpected reconciliation of %s", k)
	case <-time.After(d):
	}
}

// collect waits for n reconciliations and returns their keys, sorted.
func (r *recorder) collect(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		out = append(out, r.next(t).String())
	}
	slices.Sort(out)
	return out
}

func shoots(t *testing.T) *store.Collection {
	t.Helper()
	s := storetest.NewStore(t)
	c, err := s.Register(t.Context(), storetest.Shoots())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func run(t *testing.T, cfg controller.Config) *controller.Controller {
	t.Helper()
	c, err := controller.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Start(t, c)
	return c
}

func create(t *testing.T, c *store.Collection, s *corev1beta1.Shoot) {
	t.Helper()
	if _, err := c.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
}

func update(t *testing.T, c *store.Collection, ns, name string, mutate func(*corev1beta1.Shoot)) {
	t.Helper()
	if _, err := c.GuaranteedUpdate(t.Context(), ns, name, false, func(cur store.Object) (store.Object, error) {
		s := cur.(*corev1beta1.Shoot)
		mutate(s)
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
}

func seedOf(o store.Object) []controller.Key {
	if s := o.(*corev1beta1.Shoot).GetSpec().GetSeedName(); s != "" {
		return []controller.Key{{Name: s}}
	}
	return nil
}

func TestSourceMapsChangesToKeys(t *testing.T) {
	c := shoots(t)
	create(t, c, storetest.NewShoot("garden-a", "existing", "seed-1", nil))
	rec := newRecorder()
	run(t, controller.Config{Name: "test", Reconciler: rec, Sources: []controller.Source{{
		Collection: c, Map: seedOf,
		Digest: func(o store.Object) string { return o.(*corev1beta1.Shoot).GetSpec().GetRegion() },
	}}})

	// The current state arrives first.
	if k := rec.next(t); k != (controller.Key{Name: "seed-1"}) {
		t.Fatalf("initial key %s, want seed-1", k)
	}
	// A new object enqueues its keys.
	create(t, c, storetest.NewShoot("garden-a", "new", "seed-2", nil))
	if k := rec.next(t); k != (controller.Key{Name: "seed-2"}) {
		t.Fatalf("key of a create %s, want seed-2", k)
	}
	// A change outside the digest (labels) enqueues nothing.
	update(t, c, "garden-a", "new", func(s *corev1beta1.Shoot) { s.Metadata.Labels = map[string]string{"a": "b"} })
	rec.none(t, 300*time.Millisecond)
	// A change of the digest enqueues.
	update(t, c, "garden-a", "new", func(s *corev1beta1.Shoot) { s.Spec.Region = "other" })
	if k := rec.next(t); k != (controller.Key{Name: "seed-2"}) {
		t.Fatalf("key of a relevant change %s, want seed-2", k)
	}
	// Moving to another seed enqueues the new seed and the old one.
	update(t, c, "garden-a", "new", func(s *corev1beta1.Shoot) { s.Spec.SeedName = proto.String("seed-3") })
	if got := rec.collect(t, 2); !slices.Equal(got, []string{"seed-2", "seed-3"}) {
		t.Fatalf("keys of a move %v, want seed-2 and seed-3", got)
	}
	// A deletion enqueues the keys of the last state.
	if _, _, err := c.Delete(t.Context(), "garden-a", "new", nil); err != nil {
		t.Fatal(err)
	}
	if k := rec.next(t); k != (controller.Key{Name: "seed-3"}) {
		t.Fatalf("key of a delete %s, want seed-3", k)
	}
}

func TestOwnKeyWithoutMap(t *testing.T) {
	c := shoots(t)
	rec := newRecorder()
	run(t, controller.Config{Name: "test", Reconciler: rec, Sources: []controller.Source{{Collection: c}}})
	create(t, c, storetest.NewShoot("garden-a", "s", "", nil))
	if k := rec.next(t); k != (controller.Key{Namespace: "garden-a", Name: "s"}) {
		t.Fatalf("key %s, want garden-a/s", k)
	}
	// Without a digest, every change enqueues.
	update(t, c, "garden-a", "s", func(s *corev1beta1.Shoot) { s.Metadata.Labels = map[string]string{"a": "b"} })
	if k := rec.next(t); k.String() != "garden-a/s" {
		t.Fatalf("key %s, want garden-a/s", k)
	}
}

// waitWaiters waits until the fake clock has n waiters, so that stepping it fires what the controller set. The work
// queue always holds one (its heartbeat ticker); a requeue or backoff adds a timer, a resync a ticker.
func waitWaiters(t *testing.T, clk *clocktesting.FakeClock, n int) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for clk.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatal("the controller set no timer")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRequeueAfterAndBackoffFollowTheClock(t *testing.T) {
	c := shoots(t)
	clk := clocktesting.NewFakeClock(time.Now())
	rec := newRecorder()
	rec.answer = func(k controller.Key, n int) (controller.Result, error) {
		switch n {
		case 0:
			return controller.Result{RequeueAfter: time.Minute}, nil
		case 1, 2:
			return controller.Result{}, errors.New("boom")
		}
		return controller.Result{}, nil
	}
	run(t, controller.Config{Name: "test", Reconciler: rec, Clock: clk, RetryMin: time.Second, RetryMax: time.Hour,
		Sources: []controller.Source{{Collection: c}}})
	create(t, c, storetest.NewShoot("garden-a", "s", "", nil))
	rec.next(t)

	// RequeueAfter: nothing until the clock moves a minute.
	waitWaiters(t, clk, 2)
	clk.Step(59 * time.Second)
	rec.none(t, 200*time.Millisecond)
	clk.Step(time.Second)
	rec.next(t)
	// First error: retried after RetryMin.
	waitWaiters(t, clk, 2)
	clk.Step(999 * time.Millisecond)
	rec.none(t, 200*time.Millisecond)
	clk.Step(time.Millisecond)
	rec.next(t)
	// Second error: the backoff doubles.
	waitWaiters(t, clk, 2)
	clk.Step(1999 * time.Millisecond)
	rec.none(t, 200*time.Millisecond)
	clk.Step(time.Millisecond)
	rec.next(t)
	// Success: nothing more.
	clk.Step(time.Hour)
	rec.none(t, 300*time.Millisecond)
}

func TestResyncEnqueuesOnTheClock(t *testing.T) {
	c := shoots(t)
	clk := clocktesting.NewFakeClock(time.Now())
	rec := newRecorder()
	run(t, controller.Config{Name: "test", Reconciler: rec, Clock: clk, Resync: time.Minute,
		ResyncKeys: func(context.Context) ([]controller.Key, error) {
			return []controller.Key{{Name: "a"}, {Name: "b"}}, nil
		}, Sources: []controller.Source{{Collection: c}}})
	waitWaiters(t, clk, 2)
	rec.none(t, 200*time.Millisecond)
	clk.Step(time.Minute)
	if got := rec.collect(t, 2); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("resync keys %v, want a and b", got)
	}
}

func TestPanicIsRetried(t *testing.T) {
	c := shoots(t)
	rec := newRecorder()
	rec.answer = func(_ controller.Key, n int) (controller.Result, error) {
		if n == 0 {
			panic("bad object")
		}
		return controller.Result{}, nil
	}
	run(t, controller.Config{Name: "test", Reconciler: rec, RetryMin: time.Millisecond, Sources: []controller.Source{{Collection: c}}})
	create(t, c, storetest.NewShoot("garden-a", "s", "", nil))
	rec.next(t)
	rec.next(t) // the panic did not stop the worker; the key came back
}

func TestConfigValidation(t *testing.T) {
	for name, cfg := range map[string]controller.Config{
		"no name":              {Reconciler: newRecorder()},
		"no reconciler":        {Name: "x"},
		"resync without keys":  {Name: "x", Reconciler: newRecorder(), Resync: time.Second},
		"source without store": {Name: "x", Reconciler: newRecorder(), Sources: []controller.Source{{}}},
	} {
		if _, err := controller.New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// TestGet: an existing object is returned typed, a missing one is not an error, and the keys of cluster-scoped names
// are deduplicated without empty names.
func TestGet(t *testing.T) {
	c := shoots(t)
	create(t, c, storetest.NewShoot("garden-a", "here", "seed-1", nil))
	s, ok, err := controller.Get[*corev1beta1.Shoot](t.Context(), c, controller.Key{Namespace: "garden-a", Name: "here"})
	if err != nil || !ok || s.GetSpec().GetSeedName() != "seed-1" {
		t.Fatalf("existing shoot: %v %t %v", s, ok, err)
	}
	s, ok, err = controller.Get[*corev1beta1.Shoot](t.Context(), c, controller.Key{Namespace: "garden-a", Name: "gone"})
	if err != nil || ok || s != nil {
		t.Fatalf("missing shoot: want nil, false, nil; got %v %t %v", s, ok, err)
	}
	if got := controller.NameKeys("a", "", "b", "a"); !slices.Equal(got, []controller.Key{{Name: "a"}, {Name: "b"}}) {
		t.Errorf("NameKeys: %v", got)
	}
}
