package store_test

import (
	"context"
	"strconv"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/hub/store"
	"github.com/trellis-dev/trellis/hub/store/storetest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/tracing"
)

// TestTracesFollowIntent: the trace the store records for a version (what the agent link sends with it) is the trace
// of the write that asked for work — the creation, a new generation, the deletion — and later writes of status and
// labels, traced in a trace of their own or not at all, keep it, so that the agent's operation continues the trace of
// the request that asked for it whichever version it sees first.
func TestTracesFollowIntent(t *testing.T) {
	traces := tracing.NewIndex(64)
	s := openEmbedded(t, store.Config{DataDir: t.TempDir(), Logger: storetest.Logger(t), Traces: traces})
	shoots, err := s.Register(t.Context(), storetest.Shoots())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	traced := func(name string) (context.Context, string) {
		ctx, span := tp.Tracer("test").Start(t.Context(), name)
		t.Cleanup(func() { span.End() })
		return ctx, tracing.Traceparent(ctx)
	}
	rev := func(o store.Object) int64 {
		r, err := strconv.ParseInt(o.GetMetadata().GetResourceVersion(), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	createCtx, createTrace := traced("create")
	obj, err := shoots.Create(createCtx, storetest.NewShoot("garden-a", "s", "seed", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := traces.Lookup(rev(obj)); got != createTrace {
		t.Fatalf("the creation's version has trace %q, want the create's %q", got, createTrace)
	}

	// A hub loop's label write in a trace of its own, then an untraced status write: both keep the create's trace.
	loopCtx, _ := traced("loop")
	labelled := proto.Clone(obj).(*corev1beta1.Shoot)
	labelled.Metadata.Labels = map[string]string{"shoot.gardener.cloud/status": "healthy"}
	if obj, err = shoots.Update(loopCtx, labelled); err != nil {
		t.Fatal(err)
	}
	if got := traces.Lookup(rev(obj)); got != createTrace {
		t.Fatalf("after a label write the trace is %q, want the create's %q", got, createTrace)
	}
	status := proto.Clone(obj).(*corev1beta1.Shoot)
	status.Status = &corev1beta1.ShootStatus{TechnicalId: "shoot--a--s"}
	if obj, err = shoots.UpdateStatus(t.Context(), status); err != nil {
		t.Fatal(err)
	}
	if got := traces.Lookup(rev(obj)); got != createTrace {
		t.Fatalf("after a status write the trace is %q, want the create's %q", got, createTrace)
	}

	// A hub loop's spec change (the scheduler binding the shoot), outside any traced request: still the create's.
	bound := proto.Clone(obj).(*corev1beta1.Shoot)
	bound.Spec.SeedName = proto.String("other")
	if obj, err = shoots.Update(t.Context(), bound); err != nil {
		t.Fatal(err)
	}
	if got := traces.Lookup(rev(obj)); got != createTrace || obj.GetMetadata().GetGeneration() != 2 {
		t.Fatalf("after a hub loop's spec change (generation %d) the trace is %q, want the create's %q", obj.GetMetadata().GetGeneration(), got, createTrace)
	}

	// A traced request's spec change asks for work: its version has the change's trace.
	changeCtx, changeTrace := traced("change")
	changed := proto.Clone(obj).(*corev1beta1.Shoot)
	changed.Spec.Region = "eu-west-2"
	if obj, err = shoots.Update(changeCtx, changed); err != nil {
		t.Fatal(err)
	}
	if got := traces.Lookup(rev(obj)); got != changeTrace || changeTrace == createTrace {
		t.Fatalf("after a spec change the trace is %q, want the change's %q", got, changeTrace)
	}

	// A loop may write the next version before the writer of the one it saw has recorded that version's trace (the
	// watch delivers the commit first): the loop's version continues the trace of that write still in flight. Here
	// the in-flight write is an untraced create whose writer is held between the commit and the record (Begin).
	fresh, err := shoots.Create(t.Context(), storetest.NewShoot("garden-a", "t", "seed", nil))
	if err != nil {
		t.Fatal(err)
	}
	inFlightTrace := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	end := traces.Begin(tracing.ObjectKey("shoots.core.gardener.cloud", "garden-a", "t"), inFlightTrace)
	labelled = proto.Clone(fresh).(*corev1beta1.Shoot)
	labelled.Metadata.Labels = map[string]string{"shoot.gardener.cloud/status": "progressing"}
	if obj, err = shoots.Update(t.Context(), labelled); err != nil {
		t.Fatal(err)
	}
	end(rev(fresh))
	if got := traces.Lookup(rev(obj)); got != inFlightTrace {
		t.Fatalf("a loop's write after a commit not yet recorded has trace %q, want the write in flight's %q", got, inFlightTrace)
	}
}
