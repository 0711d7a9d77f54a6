package controller

import (
	"strconv"
	"testing"
	"time"
)

// TestFIFOKeepsOrderAndLetsGoWhenEmpty: keys come out in the order they went in, also when pushes and pops
// interleave, and a queue that ran empty holds no array of its last burst.
func TestFIFOKeepsOrderAndLetsGoWhenEmpty(t *testing.T) {
	var q fifo
	next, want := 0, 0
	push := func(n int) {
		for range n {
			q.Push(Key{Name: strconv.Itoa(next)})
			next++
		}
	}
	pop := func(n int) {
		for range n {
			if got := q.Pop(); got.Name != strconv.Itoa(want) {
				t.Fatalf("Pop = %q, want %q", got.Name, strconv.Itoa(want))
			}
			want++
		}
	}
	push(1000)
	pop(400)
	push(300)
	if q.Len() != 900 {
		t.Fatalf("Len = %d, want 900", q.Len())
	}
	pop(900)
	if q.Len() != 0 || cap(q) != 0 {
		t.Fatalf("drained queue: len %d, cap %d; want both 0 (the burst's array let go of)", q.Len(), cap(q))
	}
	push(1)
	pop(1)
}

// TestQueueSemantics: a key is queued once however often it is added, a key a worker holds is not handed out again
// until Done, and one added meanwhile is queued again by Done — client-go's workqueue.Typed contract.
func TestQueueSemantics(t *testing.T) {
	q := newQueue()
	a, b := Key{Name: "a"}, Key{Name: "b"}
	q.Add(a)
	q.Add(b)
	q.Add(a)
	if q.Len() != 2 {
		t.Fatalf("Len = %d after adding a, b, a; want 2", q.Len())
	}
	got, quit := q.Get()
	if quit || got != a {
		t.Fatalf("Get = %v, %v; want a", got, quit)
	}
	q.Add(a) // while held: not handed out before Done
	if got, _ := q.Get(); got != b {
		t.Fatalf("second Get = %v, want b (a is held)", got)
	}
	if q.Len() != 0 {
		t.Fatalf("Len = %d while a is held and added again, want 0", q.Len())
	}
	q.Done(a)
	if q.Len() != 1 {
		t.Fatalf("Len = %d after Done(a) with a added meanwhile, want 1", q.Len())
	}
	if got, _ := q.Get(); got != a {
		t.Fatalf("Get after Done = %v, want a", got)
	}
	q.Done(a)
	q.Done(b)
	if q.Len() != 0 {
		t.Fatalf("Len = %d after Done of keys not added again, want 0", q.Len())
	}
}

// TestQueueShutDown: Get returns shutdown once the queue is shut down and empty (after the keys still queued), adds
// are ignored from then on, and ShutDownWithDrain waits for the keys workers hold.
func TestQueueShutDown(t *testing.T) {
	q := newQueue()
	blocked := make(chan bool)
	go func() { _, quit := q.Get(); blocked <- quit }()
	q.ShutDown()
	if quit := <-blocked; !quit {
		t.Fatal("a Get blocked on an empty queue did not return shutdown")
	}
	q.Add(Key{Name: "late"})
	if q.Len() != 0 || !q.ShuttingDown() {
		t.Fatalf("after ShutDown: Len %d, ShuttingDown %v; want 0, true", q.Len(), q.ShuttingDown())
	}

	q = newQueue()
	q.Add(Key{Name: "held"})
	q.Add(Key{Name: "queued"})
	held, _ := q.Get()
	drained := make(chan struct{})
	go func() { q.ShutDownWithDrain(); close(drained) }()
	if k, quit := q.Get(); quit || k.Name != "queued" {
		t.Fatalf("Get while draining = %v, %v; want the queued key", k, quit)
	}
	q.Done(Key{Name: "queued"})
	select {
	case <-drained:
		t.Fatal("ShutDownWithDrain returned while a worker still held a key")
	case <-time.After(50 * time.Millisecond):
	}
	q.Done(held)
	<-drained
	if _, quit := q.Get(); !quit {
		t.Fatal("Get after the drain did not return shutdown")
	}
}

// TestQueueLetsGoOfBurstSets: after a burst of more than keySetKeep keys has been worked off, the queue's sets hold no
// map of its size (the burst's buckets are garbage), also when a key stays queued throughout; small bursts keep theirs.
func TestQueueLetsGoOfBurstSets(t *testing.T) {
	q := newQueue()
	work := func(n int) {
		for i := range n {
			q.Add(Key{Name: strconv.Itoa(i)})
		}
		for range n {
			k, _ := q.Get()
			q.Done(k)
		}
	}
	work(keySetKeep)
	if q.dirty.m == nil || q.processing.m == nil {
		t.Fatalf("a burst of %d keys let go of the sets' maps (dirty %v, processing %v); want them kept", keySetKeep, q.dirty.m == nil, q.processing.m == nil)
	}
	work(10 * keySetKeep)
	if q.dirty.peak > keySetKeep || q.order != nil {
		t.Fatalf("after a burst of %d keys: dirty's map sized for %d keys, order %d slots; want both let go of", 10*keySetKeep, q.dirty.peak, cap(q.order))
	}
	work(3) // and it works on
	if q.Len() != 0 {
		t.Fatalf("Len = %d, want 0", q.Len())
	}

	// A set that never runs empty: one key stays queued while a burst is worked off around it.
	q.Add(Key{Name: "stays"})
	for i := range 10 * keySetKeep {
		q.Add(Key{Name: "burst-" + strconv.Itoa(i)})
	}
	if first, _ := q.Get(); first.Name != "stays" {
		t.Fatalf("Get = %v, want the key queued first", first)
	} else {
		q.Add(first) // queued again while held: dirty keeps it after the burst
		for range 10 * keySetKeep {
			k, _ := q.Get()
			q.Done(k)
		}
		q.Done(first)
	}
	if q.dirty.len() != 1 || q.dirty.peak > keySetKeep {
		t.Fatalf("after a burst around a key that stayed: dirty holds %d keys in a map of a peak of %d; want 1 in a new map", q.dirty.len(), q.dirty.peak)
	}
	if k, _ := q.Get(); k.Name != "stays" {
		t.Fatalf("Get = %v, want the key that stayed", k)
	}
}
