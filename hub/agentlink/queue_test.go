package agentlink

import (
	"context"
	"testing"

	"github.com/trellis-dev/trellis/hub/seedgraph"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	"github.com/trellis-dev/trellis/proto/resources"
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

// TestWelcomeAfterEarlyControl: a session is registered, and so reachable by tunnels and rotations, before its
// initial state is queued. A control message queued then pokes the sender, which sends nothing before the Welcome (and
// so leaves the control queued) and, finding the queue empty, drops its map; welcome then queues the initial state
// into a new one (it panicked on the nil map: a hub crash seen on a loaded machine, with a tunnel opened at a session's
// start) and puts the Welcome ahead of the early message.
func TestWelcomeAfterEarlyControl(t *testing.T) {
	ss := &session{srv: &Server{}, id: "s1", ctx: context.Background(), pending: map[seedgraph.Ref]struct{}{}}
	early := &agentv1.HubMessage{Message: &agentv1.HubMessage_OpenTunnel{OpenTunnel: &agentv1.OpenTunnel{}}}
	ss.mu.Lock()
	ss.control = append(ss.control, early)
	ss.mu.Unlock()
	ss.send() // not welcomed: a nil stream would panic if it sent
	if refs, _, empty := ss.pop(10); len(refs) != 0 || !empty || ss.pending != nil {
		t.Fatalf("the empty queue popped %v (empty %v), pending %v; want nothing and the map dropped", refs, empty, ss.pending)
	}
	shoot := seedgraph.Ref{Resource: resources.Shoots, Namespace: "garden-dev", Name: "a"}
	ss.welcome([]seedgraph.Member{{Ref: shoot, Version: 3}}, false, nil)
	if !ss.welcomed.Load() {
		t.Fatal("not welcomed after welcome")
	}
	control, _, _ := ss.takeControl()
	if len(control) != 2 || control[0].GetWelcome().GetSessionId() != "s1" || control[1] != early {
		t.Fatalf("control queue %v; want the Welcome, then the early message", control)
	}
	if refs, marker, _ := ss.pop(10); len(refs) != 1 || refs[0] != shoot || marker {
		t.Fatalf("popped %v (marker %v); want the shoot", refs, marker)
	}
}
