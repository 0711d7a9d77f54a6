package tracing_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/trellis-dev/trellis/tracing"
)

// TestTraceparentRoundTrip: the traceparent of a sampled span, read back, is the parent of a new span of the same
// trace; an unsampled or absent span gives none, and the index forgets the oldest revision when full.
func TestTraceparentRoundTrip(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("t").Start(context.Background(), "parent")
	defer span.End()
	h := tracing.Traceparent(ctx)
	if h == "" {
		t.Fatal("no traceparent for a sampled span")
	}
	_, child := tp.Tracer("t").Start(tracing.WithTraceparent(context.Background(), h), "child")
	if child.SpanContext().TraceID() != span.SpanContext().TraceID() {
		t.Fatalf("child in trace %s, want %s", child.SpanContext().TraceID(), span.SpanContext().TraceID())
	}
	if tracing.Traceparent(context.Background()) != "" {
		t.Fatal("a traceparent without a span")
	}

	x := tracing.NewIndex(2)
	x.Record(ctx, 1)
	x.Record(ctx, 2)
	x.Record(ctx, 3)
	if x.Lookup(1) != "" || x.Lookup(2) != h || x.Lookup(3) != h {
		t.Fatalf("index: 1=%q 2=%q 3=%q", x.Lookup(1), x.Lookup(2), x.Lookup(3))
	}
	x.Record(context.Background(), 4) // untraced: nothing recorded, nothing evicted
	if x.Lookup(4) != "" || x.Lookup(2) != h {
		t.Fatal("an untraced write changed the index")
	}
	x.Carry(5, 3) // a write that asked for no work keeps the trace of the version it replaced
	x.Carry(6, 4) // ... and has none when that version had none
	if x.Lookup(5) != h || x.Lookup(6) != "" {
		t.Fatalf("carried: 5=%q 6=%q", x.Lookup(5), x.Lookup(6))
	}
}

// FuzzWithTraceparent: a traceparent from outside (the annotation on a seed object, the link's field) never panics,
// and one that yields a valid span context reads back as a valid traceparent.
func FuzzWithTraceparent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("00-00000000000000000000000000000000-0000000000000000-01")
	f.Add("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("")
	f.Fuzz(func(t *testing.T, h string) {
		ctx := tracing.WithTraceparent(context.Background(), h)
		if out := tracing.Traceparent(ctx); out != "" && tracing.Traceparent(tracing.WithTraceparent(context.Background(), out)) != out {
			t.Fatalf("%q read back as %q, which does not round-trip", h, out)
		}
	})
}

// TestEnabledFollowsSetup: Enabled is true from Setup with tracing on until its shutdown, and never with it off, so
// that servers leave their tracing middleware out when nothing would record.
func TestEnabledFollowsSetup(t *testing.T) {
	ctx := context.Background()
	stop, err := tracing.Setup(ctx, tracing.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if tracing.Enabled() {
		t.Fatal("enabled with tracing off")
	}
	_ = stop(ctx)
	stop, err = tracing.Setup(ctx, tracing.Config{Enabled: true, ServiceName: "test", Endpoint: "127.0.0.1:1", Insecure: true, SamplingRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !tracing.Enabled() {
		t.Fatal("not enabled after Setup with tracing on")
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = stop(sctx)
	if tracing.Enabled() {
		t.Fatal("still enabled after the shutdown")
	}
}
