package agentlink

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	"github.com/trellis-dev/trellis/test/timescale"
)

func admissionServer(starts, waiting int, timeout time.Duration) *Server {
	cfg := Config{MaxStarts: starts, MaxWaitingStarts: waiting, StartTimeout: timeout, RetryAfter: 2 * time.Second}
	cfg.defaults()
	s := &Server{cfg: cfg, starts: make(chan struct{}, cfg.MaxStarts)}
	s.metrics = newMetrics(nil, s)
	return s
}

// wantRefusal checks a refusal: RESOURCE_EXHAUSTED with a RetryInfo delay in [RetryAfter/2, 3·RetryAfter/2).
func wantRefusal(t *testing.T, what string, err error) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("%s: %v, want RESOURCE_EXHAUSTED", what, err)
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			if d := ri.GetRetryDelay().AsDuration(); d < time.Second || d >= 3*time.Second {
				t.Fatalf("%s: retry delay %v, want within [1s, 3s)", what, d)
			}
			return
		}
	}
	t.Fatalf("%s: no RetryInfo in %v", what, st.Details())
}

// One start at a time, one stream may wait: the next Connect stream is refused before it exists, other methods are
// not; a stream that waited StartTimeout is refused too; a released slot admits the next start.
func TestStartAdmission(t *testing.T) {
	s := admissionServer(1, 1, 200*time.Millisecond)
	ctx := context.Background()
	connect := &tap.Info{FullMethodName: agentv1.AgentService_Connect_FullMethodName}
	release, err := s.admitStart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TapHandle(ctx, connect); err != nil {
		t.Fatalf("nobody waits yet: %v", err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := s.admitStart(ctx)
		waited <- err
	}()
	deadline := time.Now().Add(timescale.Scale(5 * time.Second))
	for s.waiting.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the second start does not wait")
		}
		time.Sleep(time.Millisecond)
	}
	_, err = s.TapHandle(ctx, connect)
	wantRefusal(t, "a Connect stream while one waits", err)
	if _, err := s.TapHandle(ctx, &tap.Info{FullMethodName: "/trellis.core.v1beta1.ShootService/Get"}); err != nil {
		t.Fatalf("another method: %v, want it let through", err)
	}
	wantRefusal(t, "a start that waited StartTimeout", <-waited)
	release()
	release() // twice is once
	next, err := s.admitStart(ctx)
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	next()
}
