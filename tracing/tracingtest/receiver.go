package tracingtest

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Span is one received span with where it came from.
type Span struct {
	// Service is the service.name resource attribute of the process that exported it ("" when it had none).
	Service string
	// Scope is the name of the instrumentation scope (the tracer) that made it.
	Scope string
	*tracev1.Span
}

// Receiver is an OTLP trace collector: it keeps every span exported to it.
type Receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	// Addr is the host:port it listens on (OTLP gRPC, without TLS).
	Addr string

	mu    sync.Mutex
	spans []Span
}

// Start serves a Receiver on 127.0.0.1 until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{Addr: l.Addr().String()}
	s := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(s, r)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(l) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return r
}

// Export keeps the spans of req.
func (r *Receiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Service: service, Scope: ss.GetScope().GetName(), Span: s})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Trace returns the spans received so far in the trace of span.
func (r *Receiver) Trace(span Span) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if string(s.GetTraceId()) == string(span.GetTraceId()) {
			out = append(out, s)
		}
	}
	return out
}

// Find returns the first span received so far of scope named name, and whether there is one.
func (r *Receiver) Find(scope, name string) (Span, bool) {
	for _, s := range r.Spans() {
		if s.Scope == scope && s.GetName() == name {
			return s, true
		}
	}
	return Span{}, false
}
