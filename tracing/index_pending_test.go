package tracing

import "testing"

// A watcher may see a commit before its writer recorded the revision: LookupObject answers the write in flight.
func TestIndexPendingWrite(t *testing.T) {
	x := NewIndex(4)
	key := ObjectKey("shoots.core.gardener.cloud", "garden-dev", "a")
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	end := x.Begin(key, tp)
	if got := x.LookupObject(7, key); got != tp {
		t.Fatalf("in flight: %q, want the write's traceparent", got)
	}
	if got := x.LookupObject(7, ObjectKey("shoots.core.gardener.cloud", "garden-dev", "b")); got != "" {
		t.Fatalf("another object: %q, want none", got)
	}
	end(7)
	if got := x.LookupObject(7, key); got != tp {
		t.Fatalf("recorded: %q", got)
	}
	if got := x.LookupObject(8, key); got != "" {
		t.Fatalf("after the write ended, an unrecorded revision: %q, want none", got)
	}
	// A later write's Begin is not ended by an earlier write's end.
	end1 := x.Begin(key, "first")
	end2 := x.Begin(key, "second")
	end1(0)
	if got := x.LookupObject(9, key); got != "second" {
		t.Fatalf("overlapping writes: %q, want the later one's", got)
	}
	end2(0)
	if x.Begin(key, "")(0); x.LookupObject(9, key) != "" {
		t.Fatal("an empty traceparent is not pending")
	}
}
