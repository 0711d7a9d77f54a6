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
	if x.Begin(key, "")(0); x.LookupObject(9, key) != "" {
		t.Fatal("an empty traceparent is not pending")
	}
}

// Writes of one object overlap (two loops write it at once): whichever ends first, the other's trace is still found
// for a revision not recorded yet. When the second loses the compare-and-swap and ends first, it decides again on
// the first's version, which the agent link may send too: the first's trace must be found (a lost link once sent the
// example shoot's first version to its agent without one, test/e2e TestOperated under load).
func TestIndexOverlappingWrites(t *testing.T) {
	key := ObjectKey("shoots.core.gardener.cloud", "garden-local", "e2e")
	for _, firstEnds := range []bool{true, false} {
		x := NewIndex(4)
		ends := map[string]func(int64){"first": x.Begin(key, "first"), "second": x.Begin(key, "second")}
		ended, open := "second", "first"
		if firstEnds {
			ended, open = open, ended
		}
		ends[ended](0)
		if got := x.LookupObject(12, key); got != open {
			t.Fatalf("%s ended: %q for a revision not recorded, want %q", ended, got, open)
		}
		ends[open](12)
		if got := x.LookupObject(12, key); got != open {
			t.Fatalf("recorded: %q, want %q", got, open)
		}
		if got := x.LookupObject(13, key); got != "" || len(x.pending) != 0 {
			t.Fatalf("after both ended: %q for an unrecorded revision, %v pending; want none", got, x.pending)
		}
	}
}
