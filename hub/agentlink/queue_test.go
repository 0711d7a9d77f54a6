package agentlink

import (
	"testing"

	"github.com/trellis-dev/trellis/hub/seedgraph"
)

// TestQueuedAssignmentsLeaveOutTheSyncMarker: a session's queue counts its objects (QueueLength, the queued
// assignments gauge) without the sync marker queued behind a session's initial state, and the queue's entries with
// it until the marker is sent (what a heartbeat ack's synced revision waits for).
func TestQueuedAssignmentsLeaveOutTheSyncMarker(t *testing.T) {
	ss := &session{pending: map[seedgraph.Ref]struct{}{}}
	for _, name := range []string{"a", "b"} {
		ref := seedgraph.Ref{Resource: "shoots", Namespace: "garden-dev", Name: name}
		ss.pending[ref] = struct{}{}
		ss.order = append(ss.order, ref)
	}
	ss.pending[syncMarker] = struct{}{}
	ss.order = append(ss.order, syncMarker)
	if got, entries := ss.queuedAssignments(), ss.queueLen(); got != 2 || entries != 3 {
		t.Fatalf("initial state of two objects: %d assignments, %d entries; want 2 and 3", got, entries)
	}
	if refs, marker, _ := ss.pop(10); len(refs) != 2 || marker {
		t.Fatalf("popped %d refs, marker %v; want the two objects before the marker", len(refs), marker)
	}
	if got, entries := ss.queuedAssignments(), ss.queueLen(); got != 0 || entries != 1 {
		t.Fatalf("only the marker left: %d assignments, %d entries; want 0 and 1", got, entries)
	}
	if _, marker, empty := ss.pop(10); !marker || !empty {
		t.Fatalf("marker %v, empty %v; want the marker and an empty queue", marker, empty)
	}
	if got, entries := ss.queuedAssignments(), ss.queueLen(); got != 0 || entries != 0 {
		t.Fatalf("empty queue: %d assignments, %d entries", got, entries)
	}
}
