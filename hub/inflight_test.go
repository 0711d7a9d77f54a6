package hub

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestInflightRequestsMakeTheAPIBusy: a REST request being served makes the API busy, for the loops' lane to yield
// to; a watch, which waits more than it works, does not; and the count goes back when the request ends.
func TestInflightRequestsMakeTheAPIBusy(t *testing.T) {
	m := newMetrics()
	var during []bool
	h := m.http(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { during = append(during, m.Busy()) }))
	for _, target := range []string{
		"/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots",
		"/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots?watch=true",
		"/apis/core.gardener.cloud/v1beta1/watch/namespaces/garden-dev/shoots",
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, target, nil))
		if m.Busy() {
			t.Fatalf("%s: the API is still busy after the request", target)
		}
	}
	if want := []bool{true, false, false}; len(during) != 3 || during[0] != want[0] || during[1] != want[1] || during[2] != want[2] {
		t.Fatalf("busy while serving a list, a watch, a /watch/ path: %v, want %v", during, want)
	}
}

// busyHealth answers a check and a watch with whether the API counted as busy while it served them.
type busyHealth struct{ m *metrics }

func servingIf(busy bool) healthpb.HealthCheckResponse_ServingStatus {
	if busy {
		return healthpb.HealthCheckResponse_SERVING
	}
	return healthpb.HealthCheckResponse_NOT_SERVING
}

func (h busyHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return &healthpb.HealthCheckResponse{Status: servingIf(h.m.Busy())}, nil
}

func (h busyHealth) Watch(_ *healthpb.HealthCheckRequest, s grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	return s.Send(&healthpb.HealthCheckResponse{Status: servingIf(h.m.Busy())})
}

func (busyHealth) List(context.Context, *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	return &healthpb.HealthListResponse{}, nil
}

// TestInflightGRPCCallsMakeTheAPIBusy: through the hub's interceptors, a unary call being served makes the API busy;
// a stream (a watch, an agent's session) does not; and the count goes back when the call ends.
func TestInflightGRPCCallsMakeTheAPIBusy(t *testing.T) {
	m := newMetrics()
	client, ctx := serveIntercepted(t, m, io.Discard, busyHealth{m})
	resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatal("the API was not busy while it served a unary call")
	}
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err = stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatal("a stream made the API busy")
	}
	if m.Busy() {
		t.Fatal("the API is still busy after the calls")
	}
}
