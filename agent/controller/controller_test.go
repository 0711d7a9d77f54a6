package controller_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/controller"
	"github.com/trellis-dev/trellis/agent/hubobject"
	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// apply applies one assignment to c: obj (with resourceVersion rv), or its removal.
func apply(t *testing.T, c *cache.Cache, resource string, obj hubobject.Object, rv int64, removed bool) {
	t.Helper()
	md := obj.GetMetadata()
	md.ResourceVersion = strconv.FormatInt(rv, 10)
	a := &agentv1.Assignment{Resource: resource, Namespace: md.GetNamespace(), Name: md.GetName(), ResourceVersion: rv, Removed: removed}
	if !removed {
		var err error
		if a.Object, err = anypb.New(obj); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Apply(&agentv1.AssignmentBatch{Assignments: []*agentv1.Assignment{a}}); err != nil {
		t.Fatal(err)
	}
}

func bucket(name string) *corev1beta1.BackupBucket {
	return &corev1beta1.BackupBucket{Metadata: &metav1.ObjectMeta{Name: name}}
}

func entry(ns, name, bucket string) *corev1beta1.BackupEntry {
	return &corev1beta1.BackupEntry{Metadata: &metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: &corev1beta1.BackupEntrySpec{BucketName: bucket}}
}

// events is what the controller did ("sync <key>", "forget <key>"), as it happened, and the counts of what the test
// has read of it.
type events struct {
	ch   chan string
	seen map[string]int
}

func newEvents() *events { return &events{ch: make(chan string, 100), seen: map[string]int{}} }

// await reads events until want has happened n times in all, and fails the test after 10 s.
func (e *events) await(t *testing.T, want string, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for e.seen[want] < n {
		select {
		case ev := <-e.ch:
			e.seen[ev]++
		case <-timeout:
			t.Fatalf("timed out waiting for %q %d times; saw %v", want, n, e.seen)
		}
	}
}

// drain reads what happened within d.
func (e *events) drain(d time.Duration) {
	timeout := time.After(d)
	for {
		select {
		case ev := <-e.ch:
			e.seen[ev]++
		case <-timeout:
			return
		}
	}
}

// TestWatchesSyncsAndLoops drives a controller of BackupEntries through the agent's cache: entries already cached
// and added later are synced under their keys, a bucket's change syncs the entries in it (and no other), a failing
// sync is retried, a deleted entry is forgotten and its Deleted keys synced, and Run waits for its loop.
func TestWatchesSyncsAndLoops(t *testing.T) {
	c := cache.New()
	apply(t, c, resources.BackupEntries, entry("garden-a", "e1", "b1"), 1, false)
	c.CompleteSync(&agentv1.SyncComplete{Resources: []*agentv1.ResourceKeys{{Resource: resources.BackupEntries, Keys: []string{"garden-a/e1"}}}})

	ev := newEvents()
	failed := false // read and written by the one worker that syncs garden-a/e2 at a time
	loopDone := make(chan struct{})
	// The generic controller uses only the cache, the log and the work loop's settings of its Base.
	base := controller.Base{Cache: c, Workers: 2, RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond}
	ctrl := controller.New(controller.Config{Base: base, Name: "backupEntry",
		Sync: func(_ context.Context, key string) (time.Duration, error) {
			ev.ch <- "sync " + key
			if key == "garden-a/e2" && !failed {
				failed = true
				return 0, errors.New("not yet")
			}
			return 0, nil
		},
		Watches: []controller.Watch{
			{Resource: resources.BackupEntries, Keys: controller.Own[*corev1beta1.BackupEntry](nil),
				Forget:  func(key string) { ev.ch <- "forget " + key },
				Deleted: func(proto.Message) []string { return []string{"gone"} }},
			{Resource: resources.BackupBuckets, Keys: controller.Each(c, resources.BackupEntries, func(e *corev1beta1.BackupEntry, b *corev1beta1.BackupBucket) bool {
				return e.GetSpec().GetBucketName() == b.GetMetadata().GetName()
			})},
		},
		Loops: []func(context.Context){func(ctx context.Context) { <-ctx.Done(); close(loopDone) }},
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()

	ev.await(t, "sync garden-a/e1", 1) // cached before Run
	apply(t, c, resources.BackupEntries, entry("garden-a", "e2", "b2"), 2, false)
	ev.await(t, "sync garden-a/e2", 2) // failed, then retried
	apply(t, c, resources.BackupBuckets, bucket("b1"), 3, false)
	ev.await(t, "sync garden-a/e1", 2) // in the changed bucket
	apply(t, c, resources.BackupEntries, entry("garden-a", "e1", "b1"), 1, true)
	ev.await(t, "forget garden-a/e1", 1)
	ev.await(t, "sync gone", 1)
	ev.drain(50 * time.Millisecond)
	if ev.seen["sync garden-a/e2"] != 2 || ev.seen["forget garden-a/e1"] != 1 {
		t.Errorf("the entry in the unchanged bucket synced %d times (want 2), the deleted one forgotten %d times (want 1)",
			ev.seen["sync garden-a/e2"], ev.seen["forget garden-a/e1"])
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	select {
	case <-loopDone:
	default:
		t.Fatal("Run returned before its loop")
	}
	// The watches are gone with Run: a change no longer syncs anything.
	apply(t, c, resources.BackupEntries, entry("garden-a", "e3", "b1"), 4, false)
	ev.drain(50 * time.Millisecond)
	if n := ev.seen["sync garden-a/e3"]; n != 0 {
		t.Errorf("a change after Run returned was synced %d times", n)
	}
}

// TestComplete: a Base without its connections is refused with every missing field named; a complete one gets the
// controller's defaults where it left settings zero, keeps those it set, and a RetryMax below RetryMin is refused.
func TestComplete(t *testing.T) {
	var empty controller.Base
	err := empty.Complete("bastion", controller.Defaults{})
	if err == nil || !strings.Contains(err.Error(), "bastion controller") || !strings.Contains(err.Error(), "SeedName, Cache, Hub, Seed") {
		t.Fatalf("Complete of an empty Base: %v, want an error naming the controller and SeedName, Cache, Hub, Seed", err)
	}
	hub, err := grpc.NewClient("passthrough:///nowhere", grpc.WithTransportCredentials(insecure.NewCredentials())) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Close() })
	seed, err := client.New(&rest.Config{Host: "https://127.0.0.1:1"}, client.Options{}) // never called
	if err != nil {
		t.Fatal(err)
	}
	b := controller.Base{SeedName: "s", Cache: cache.New(), Hub: hub, Seed: seed, RetryMax: time.Minute, SyncPeriod: -1}
	if err := b.Complete("bastion", controller.Defaults{Workers: 3, RetryMin: time.Second, RetryMax: time.Hour, SyncPeriod: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if b.Workers != 3 || b.RetryMin != time.Second || b.RetryMax != time.Minute || b.SyncPeriod != -1 ||
		b.HubTimeout != controller.DefaultHubTimeout || b.Now == nil || b.Log == nil {
		t.Errorf("completed Base: workers %d, retry %s..%s, sync period %s, hub timeout %s, clock set %v, log set %v",
			b.Workers, b.RetryMin, b.RetryMax, b.SyncPeriod, b.HubTimeout, b.Now != nil, b.Log != nil)
	}
	var poll time.Duration
	if err := b.CompleteMirror("bastion", controller.MirrorDefaults, &poll); err != nil || poll != time.Second {
		t.Errorf("CompleteMirror: %v, poll interval %s, want 1s", err, poll)
	}
	b.RetryMin, b.RetryMax = time.Minute, time.Second
	if err := b.Complete("bastion", controller.Defaults{}); err == nil || !strings.Contains(err.Error(), "RetryMax") {
		t.Errorf("Complete with RetryMax < RetryMin: %v, want an error naming RetryMax", err)
	}
}
