package controller

import (
	"strconv"
	"testing"
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
