package store

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracer makes the spans of the store's writes (the global TracerProvider: a no-op unless the program installs one).
var tracer = otel.Tracer("github.com/trellis-dev/trellis/hub/store")

// endSpan ends span, marking it failed with err.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
