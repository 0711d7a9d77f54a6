package cache_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/trellis-dev/trellis/agent/cache"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/resources"
)

func shoot(ns, name string, rv int64) *agentv1.Assignment {
	obj := &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: strconv.FormatInt(rv, 10)}}
	a, err := anypb.New(obj)
	if err != nil {
		panic(err)
	}
	return &agentv1.Assignment{Resource: resources.Shoots, Namespace: ns, Name: name, ResourceVersion: rv, Object: a}
}

func secret(ns, name string, rv int64) *agentv1.Assignment {
	obj := &kcorev1.Secret{Metadata: &metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: strconv.FormatInt(rv, 10)}}
	a, err := anypb.New(obj)
	if err != nil {
		panic(err)
	}
	return &agentv1.Assignment{Resource: resources.Secrets, Namespace: ns, Name: name, ResourceVersion: rv, Object: a}
}

func removed(resource, ns, name string, rv int64) *agentv1.Assignment {
	return &agentv1.Assignment{Resource: resource, Namespace: ns, Name: name, ResourceVersion: rv, Removed: true}
}

// recorder is a Handler that writes down what it sees.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

func name(m proto.Message) string {
	type named interface{ GetMetadata() *metav1.ObjectMeta }
	md := m.(named).GetMetadata()
	return cache.Key(md.GetNamespace(), md.GetName()) + "@" + md.GetResourceVersion()
}

func (r *recorder) OnAdd(obj proto.Message, initial bool) {
	r.add(fmt.Sprintf("add %s initial=%v", name(obj), initial))
}
func (r *recorder) OnUpdate(old, obj proto.Message) {
	r.add("update " + name(old) + " -> " + name(obj))
}
func (r *recorder) OnDelete(obj proto.Message) { r.add("delete " + name(obj)) }

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func TestApplyHandlersAndVersions(t *testing.T) {
	c := cache.New()
	shoots := &recorder{}
	c.AddEventHandler(resources.Shoots, shoots)

	if err := c.Apply(&agentv1.AssignmentBatch{Sequence: 1, Assignments: []*agentv1.Assignment{
		shoot("garden-dev", "a", 10), shoot("garden-dev", "b", 11), secret("garden-dev", "s", 12),
	}, SyncedVersions: map[string]int64{resources.Shoots: 11, resources.Secrets: 12}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"add garden-dev/a@10 initial=true", "add garden-dev/b@11 initial=true"}, shoots.take()); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	c.CompleteSync(&agentv1.SyncComplete{Resources: []*agentv1.ResourceKeys{
		{Resource: resources.Shoots, Keys: []string{"garden-dev/a", "garden-dev/b"}},
		{Resource: resources.Secrets, Keys: []string{"garden-dev/s"}},
	}})
	if !c.HasSynced() {
		t.Fatal("not synced after SyncComplete")
	}
	if got := shoots.take(); len(got) != 0 {
		t.Fatalf("SyncComplete listing everything caused events: %v", got)
	}

	// Changes after the sync: an update, a no-op resend, an add and a removal, in this order.
	if err := c.Apply(&agentv1.AssignmentBatch{Sequence: 2, Assignments: []*agentv1.Assignment{
		shoot("garden-dev", "a", 20), shoot("garden-dev", "b", 11), shoot("garden-dev", "c", 21), removed(resources.Shoots, "garden-dev", "b", 22),
	}, SyncedVersions: map[string]int64{resources.Shoots: 22}}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"update garden-dev/a@10 -> garden-dev/a@20",
		"add garden-dev/c@21 initial=false",
		"delete garden-dev/b@11",
	}
	if diff := cmp.Diff(want, shoots.take()); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{resources.Shoots: 22, resources.Secrets: 12}, c.SyncedVersions()); diff != "" {
		t.Fatalf("synced versions (-want +got):\n%s", diff)
	}
	wantSnap := map[string]map[string]int64{
		resources.Shoots:  {"garden-dev/a": 20, "garden-dev/c": 21},
		resources.Secrets: {"garden-dev/s": 12},
	}
	if diff := cmp.Diff(wantSnap, c.Snapshot()); diff != "" {
		t.Fatalf("snapshot (-want +got):\n%s", diff)
	}

	// Typed helpers.
	s, ok := cache.Get[*corev1beta1.Shoot](c, resources.Shoots, "garden-dev", "a")
	if !ok || s.GetMetadata().GetResourceVersion() != "20" {
		t.Fatalf("Get shoot a = %v, %v", s, ok)
	}
	if _, ok := cache.Get[*kcorev1.Secret](c, resources.Shoots, "garden-dev", "a"); ok {
		t.Fatal("Get with the wrong type succeeded")
	}
	if got := cache.List[*corev1beta1.Shoot](c, resources.Shoots); len(got) != 2 || got[0].GetMetadata().GetName() != "a" || got[1].GetMetadata().GetName() != "c" {
		t.Fatalf("List shoots = %v", got)
	}
	if _, ok := c.Get(resources.Secrets, "garden-dev/s"); !ok {
		t.Fatal("secret missing")
	}
}

// TestSetSynced: a heartbeat ack's versions are recorded as a batch's, and its revision becomes the version of every
// streamed resource; an ack with neither changes nothing.
func TestSetSynced(t *testing.T) {
	c := cache.New()
	c.SetSynced(map[string]int64{resources.Shoots: 5}, 0)
	c.SetSynced(nil, 0)
	if diff := cmp.Diff(map[string]int64{resources.Shoots: 5}, c.SyncedVersions()); diff != "" {
		t.Fatalf("synced versions after an ack's versions (-want +got):\n%s", diff)
	}
	c.SetSynced(nil, 9)
	want := map[string]int64{}
	for _, r := range resources.Streamed {
		want[r] = 9
	}
	if diff := cmp.Diff(want, c.SyncedVersions()); diff != "" {
		t.Fatalf("synced versions after an ack's revision (-want +got):\n%s", diff)
	}
}

func TestCompleteSyncDropsUnlisted(t *testing.T) {
	c := cache.New()
	if err := c.Apply(&agentv1.AssignmentBatch{Assignments: []*agentv1.Assignment{
		shoot("p", "keep", 1), shoot("p", "stale", 2), secret("p", "s1", 3), secret("p", "s2", 4),
		{Resource: resources.BackupEntries, Name: "x", ResourceVersion: 5, Object: mustAny(&corev1beta1.BackupEntry{Metadata: &metav1.ObjectMeta{Name: "x", ResourceVersion: "5"}})},
	}}); err != nil {
		t.Fatal(err)
	}
	shoots, secrets, entries := &recorder{}, &recorder{}, &recorder{}
	c.AddEventHandler(resources.Shoots, shoots)
	c.AddEventHandler(resources.Secrets, secrets)
	c.AddEventHandler(resources.BackupEntries, entries)
	shoots.take()
	secrets.take()
	entries.take()

	// Shoots: only "keep" is listed; secrets are not listed at all; backup entries are listed with their key.
	c.CompleteSync(&agentv1.SyncComplete{Resources: []*agentv1.ResourceKeys{
		{Resource: resources.Shoots, Keys: []string{"p/keep"}},
		{Resource: resources.BackupEntries, Keys: []string{"x"}},
	}})
	if diff := cmp.Diff([]string{"delete p/stale@2"}, shoots.take()); diff != "" {
		t.Fatalf("shoot events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"delete p/s1@3", "delete p/s2@4"}, secrets.take()); diff != "" {
		t.Fatalf("secret events (-want +got):\n%s", diff)
	}
	if got := entries.take(); len(got) != 0 {
		t.Fatalf("backup entry events: %v", got)
	}
	want := map[string]map[string]int64{resources.Shoots: {"p/keep": 1}, resources.BackupEntries: {"x": 5}}
	if diff := cmp.Diff(want, c.Snapshot()); diff != "" {
		t.Fatalf("snapshot (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{resources.BackupEntries, resources.Shoots}, c.Resources()); diff != "" {
		t.Fatalf("resources (-want +got):\n%s", diff)
	}

	// An empty SyncComplete drops everything.
	c.CompleteSync(&agentv1.SyncComplete{})
	if snap := c.Snapshot(); len(snap) != 0 {
		t.Fatalf("snapshot after empty SyncComplete: %v", snap)
	}
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

func TestAddEventHandlerReplaysAndRemoves(t *testing.T) {
	c := cache.New()
	if err := c.Apply(&agentv1.AssignmentBatch{Assignments: []*agentv1.Assignment{shoot("p", "b", 2), shoot("p", "a", 1)}}); err != nil {
		t.Fatal(err)
	}
	c.CompleteSync(&agentv1.SyncComplete{Resources: []*agentv1.ResourceKeys{{Resource: resources.Shoots, Keys: []string{"p/a", "p/b"}}}})
	r := &recorder{}
	remove := c.AddEventHandler(resources.Shoots, r)
	if diff := cmp.Diff([]string{"add p/a@1 initial=true", "add p/b@2 initial=true"}, r.take()); diff != "" {
		t.Fatalf("replay (-want +got):\n%s", diff)
	}
	remove()
	if err := c.Apply(&agentv1.AssignmentBatch{Assignments: []*agentv1.Assignment{shoot("p", "c", 3)}}); err != nil {
		t.Fatal(err)
	}
	if got := r.take(); len(got) != 0 {
		t.Fatalf("removed handler got %v", got)
	}
}

func TestHandlerFuncsMayReadTheCache(t *testing.T) {
	c := cache.New()
	var seen []string
	c.AddEventHandler(resources.Shoots, cache.HandlerFuncs{
		AddFunc: func(obj proto.Message) {
			// Reading inside a handler must not deadlock, and sees the change.
			s, ok := cache.Get[*corev1beta1.Shoot](c, resources.Shoots, "p", obj.(*corev1beta1.Shoot).GetMetadata().GetName())
			seen = append(seen, fmt.Sprintln(ok, s.GetMetadata().GetResourceVersion()))
		},
		DeleteFunc: func(obj proto.Message) {
			_, ok := c.Get(resources.Shoots, "p/a")
			seen = append(seen, fmt.Sprint("deleted, still cached: ", ok))
		},
	})
	if err := c.Apply(&agentv1.AssignmentBatch{Assignments: []*agentv1.Assignment{shoot("p", "a", 7)}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(&agentv1.AssignmentBatch{Assignments: []*agentv1.Assignment{removed(resources.Shoots, "p", "a", 8)}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"true 7\n", "deleted, still cached: false"}, seen); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestUnknownTypeIsKeptAsAny(t *testing.T) {
	c := cache.New()
	a := &anypb.Any{TypeUrl: "type.googleapis.com/trellis.example.v1.Unknown", Value: []byte{}}
	err := c.Apply(&agentv1.AssignmentBatch{Assignments: []*agentv1.Assignment{
		{Resource: "unknowns.example.com", Name: "u", ResourceVersion: 1, Object: a}, shoot("p", "a", 2),
	}, SyncedVersions: map[string]int64{resources.Shoots: 2}})
	if err == nil {
		t.Fatal("no error for an unknown type")
	}
	if obj, ok := c.Get("unknowns.example.com", "u"); !ok || !proto.Equal(obj, a) {
		t.Fatalf("unknown object = %v, %v; want the Any", obj, ok)
	}
	if _, ok := c.Get(resources.Shoots, "p/a"); !ok {
		t.Fatal("the rest of the batch was not applied")
	}
	if c.SyncedVersions()[resources.Shoots] != 2 {
		t.Fatal("synced versions not recorded")
	}
}

func TestWaitForSync(t *testing.T) {
	c := cache.New()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.WaitForSync(ctx); err == nil {
		t.Fatal("WaitForSync returned before any sync")
	}
	done := make(chan error, 1)
	go func() { done <- c.WaitForSync(context.Background()) }()
	c.CompleteSync(&agentv1.SyncComplete{})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitForSync did not return after SyncComplete")
	}
}

// TestConcurrentReadersAndWriter runs under -race: readers and handler registrations race with a writer, and every
// handler sees each object's events in order.
func TestConcurrentReadersAndWriter(t *testing.T) {
	c := cache.New()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.List(resources.Shoots)
				c.Snapshot()
				c.SyncedVersions()
			}
		})
	}
	type last struct {
		mu sync.Mutex
		rv map[string]int64
	}
	l := &last{rv: map[string]int64{}}
	check := func(obj proto.Message) {
		md := obj.(*corev1beta1.Shoot).GetMetadata()
		rv, _ := strconv.ParseInt(md.GetResourceVersion(), 10, 64)
		l.mu.Lock()
		defer l.mu.Unlock()
		if rv < l.rv[md.GetName()] {
			t.Errorf("%s: event for version %d after %d", md.GetName(), rv, l.rv[md.GetName()])
		}
		l.rv[md.GetName()] = rv
	}
	c.AddEventHandler(resources.Shoots, cache.HandlerFuncs{AddFunc: check, UpdateFunc: func(_, n proto.Message) { check(n) }})
	for i := range 500 {
		n := fmt.Sprintf("s%d", i%7)
		if err := c.Apply(&agentv1.AssignmentBatch{Assignments: []*agentv1.Assignment{shoot("p", n, int64(i+1))}, SyncedVersions: map[string]int64{resources.Shoots: int64(i + 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if got := len(c.Keys(resources.Shoots)); got != 7 {
		t.Fatalf("%d shoots cached, want 7", got)
	}
}
