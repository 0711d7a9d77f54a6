package agentsim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/test/bufconn"

	agentv1 "github.com/trellis-dev/trellis/proto/gen/trellis/agent/v1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// coalescingHub is a stand-in for the hub: it answers the first two heartbeats of a session with one acknowledgement
// of the second, as the hub does when its sender is behind, which a test cannot bring about in a real hub reliably;
// then it waits for the session to end.
type coalescingHub struct {
	agentv1.UnimplementedAgentServiceServer
}

func (coalescingHub) Connect(stream agentv1.AgentService_ConnectServer) error {
	if _, err := stream.Recv(); err != nil { // Hello
		return err
	}
	if err := stream.Send(&agentv1.HubMessage{Message: &agentv1.HubMessage_Welcome{Welcome: &agentv1.Welcome{}}}); err != nil {
		return err
	}
	var last int64
	for range 2 {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		last = m.GetHeartbeat().GetSequence()
	}
	if err := stream.Send(&agentv1.HubMessage{Message: &agentv1.HubMessage_HeartbeatAck{HeartbeatAck: &agentv1.HeartbeatAck{Sequence: last}}}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// TestCumulativeAckMeasuresEveryHeartbeat: an acknowledgement acknowledges every heartbeat up to its sequence, as the
// real agent takes it, so the simulator reports a round trip for each of them (none is left out of the latencies).
func TestCumulativeAckMeasuresEveryHeartbeat(t *testing.T) {
	ca := hubtest.NewCA(t, "hub", false)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)

	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{ca.ServingCert(t, "127.0.0.1")}})))
	agentv1.RegisterAgentServiceServer(srv, coalescingHub{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	var mu sync.Mutex
	var rtts []time.Duration
	two := make(chan struct{})
	a := &Agent{Seed: "s", HeartbeatInterval: 20 * time.Millisecond, Dialer: Dialer{
		Target: "passthrough:///bufnet", CA: pool,
		Options: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })},
	}, OnHeartbeatAck: func(rtt time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if rtts = append(rtts, rtt); len(rtts) == 2 {
			close(two)
		}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Session(ctx) }()
	select {
	case <-two:
	case err := <-done:
		t.Fatalf("session ended before two round trips were reported: %v", err)
	case <-time.After(10 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("round trips reported for one ack of heartbeats 1 and 2: %v, want two", rtts)
	}
	cancel()
	_ = <-done // the session ends with the cancelled context
	mu.Lock()
	defer mu.Unlock()
	if rtts[0] <= rtts[1] {
		t.Fatalf("round trips %v: the first heartbeat's should be the longer (it waited an interval more)", rtts)
	}
}
