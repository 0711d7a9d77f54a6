package store

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-dev/trellis/tracing"
)

// tracer makes the spans of the store's writes (the global TracerProvider: a no-op unless the program installs one).
var tracer = otel.Tracer("github.com/trellis-dev/trellis/hub/store")

// noSpan is the span of writes while tracing is off.
var noSpan = trace.SpanFromContext(context.Background())

// startSpan starts the span of a write, op on the collection's resource; with tracing off (tracing.Enabled) it
// returns ctx and a no-op span without building the span's name.
func (c *Collection) startSpan(ctx context.Context, op string) (context.Context, trace.Span) {
	if !tracing.Enabled() {
		return ctx, noSpan
	}
	return tracer.Start(ctx, op+" "+c.gr.String())
}

// endSpan ends span, marking it failed with err.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
