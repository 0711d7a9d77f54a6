package agentlink

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
)

// TapHandle is the agent link's gRPC InTapHandle (grpc.InTapHandle), run by the connection's reader before a stream
// exists: while MaxWaitingStarts Connect streams wait for one of the MaxStarts session start slots, it refuses more at
// once with RESOURCE_EXHAUSTED and a jittered retry delay (a google.rpc.RetryInfo detail). A reconnect storm is turned
// away before any work is done for it, and the agents come back spread out.
func (s *Server) TapHandle(ctx context.Context, info *tap.Info) (context.Context, error) {
	if info.FullMethodName == agentv1.AgentService_Connect_FullMethodName && s.waiting.Load() >= int64(s.cfg.MaxWaitingStarts) {
		s.metrics.refused.Inc()
		return nil, s.refusal()
	}
	return ctx, nil
}

// statusWriter is what gRPC's transport streams offer (grpc.ServerTransportStreamFromContext) to end a stream with a
// status before its handler returns; ending it cancels its context, which ends a Recv blocked on another goroutine.
type statusWriter interface {
	WriteStatus(*status.Status) error
}

// statusWriterOf returns the status writer of the stream of ctx, nil if gRPC offers none.
func statusWriterOf(ctx context.Context) statusWriter {
	w, _ := grpc.ServerTransportStreamFromContext(ctx).(statusWriter)
	return w
}

// refusal is the RESOURCE_EXHAUSTED status of a turned-away stream, with a delay drawn uniformly from
// [RetryAfter/2, 3·RetryAfter/2).
func (s *Server) refusal() error {
	d := s.cfg.RetryAfter/2 + time.Duration(rand.Int64N(int64(s.cfg.RetryAfter))) //nolint:gosec // G404: jitter, not a secret
	d = d.Truncate(time.Millisecond)
	st, err := status.New(codes.ResourceExhausted, "the hub is starting too many agent sessions; retry in "+d.String()).
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	if err != nil {
		return status.Error(codes.ResourceExhausted, "the hub is starting too many agent sessions")
	}
	return st.Err()
}

// admitStart waits for one of MaxStarts session start slots and returns its release; a stream that waited
// StartTimeout is refused like those TapHandle turns away.
func (s *Server) admitStart(ctx context.Context) (func(), error) {
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	select {
	case s.starts <- struct{}{}:
	default:
		t := time.NewTimer(s.cfg.StartTimeout)
		defer t.Stop()
		select {
		case s.starts <- struct{}{}:
		case <-t.C:
			s.metrics.refused.Inc()
			return nil, s.refusal()
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	released := false
	return func() {
		if !released {
			released = true
			<-s.starts
		}
	}, nil
}
