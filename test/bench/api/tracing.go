package main

import (
	"context"
	"net"
	"sync/atomic"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// sink is an OTLP trace receiver that counts and drops spans: with -tracing the hub exports its spans (100 %
// sampling) to it, so that the run measures tracing's cost including the export.
type sink struct {
	collectortrace.UnimplementedTraceServiceServer
	spans atomic.Int64
}

func (s *sink) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			s.spans.Add(int64(len(ss.GetSpans())))
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// startSink serves a sink on loopback; stop ends it.
func startSink() (s *sink, addr string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	s = &sink{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, s)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	return s, l.Addr().String(), func() { srv.Stop(); <-done }, nil
}
