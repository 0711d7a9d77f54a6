package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/store/storetest"
)

// secretDetail is what an internal error says that no client may read.
const secretDetail = "open /var/lib/trellis/etcd/member/snap/db: permission denied"

// logBuffer collects log lines written from server goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// failingHealth fails its calls with an internal error, or with a NotFound when the service asked for is "missing".
type failingHealth struct {
	healthpb.UnimplementedHealthServer
}

func (failingHealth) fail(service string) error {
	if service == "missing" {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, service)
	}
	return errors.New(secretDetail)
}

func (f failingHealth) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return nil, f.fail(req.GetService())
}

func (f failingHealth) Watch(req *healthpb.HealthCheckRequest, _ grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	return f.fail(req.GetService())
}

// serveIntercepted serves h through the hub's interceptors (authentication on a real store, request ids, errors
// logged to logs, metrics m) and returns a client and a context carrying the admin token.
func serveIntercepted(t *testing.T, m *metrics, logs io.Writer, h healthpb.HealthServer) (healthpb.HealthClient, context.Context) {
	t.Helper()
	st := storetest.NewStore(t)
	tokenFile := filepath.Join(t.TempDir(), "admin-token")
	authn, err := auth.Open(t.Context(), auth.Config{Etcd: st.Client(), Prefix: st.Prefix(), TokenFile: tokenFile})
	if err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	ic := &interceptors{authn: authn, metrics: m, errors: api.Errors{Log: slog.New(slog.NewTextHandler(logs, nil))}}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(ic.unary), grpc.ChainStreamInterceptor(ic.stream))
	healthpb.RegisterHealthServer(srv, h)
	lis := bufconn.Listen(1 << 20)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn), metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+strings.TrimSpace(string(token)))
}

// TestGRPCInternalErrorHasRequestID: through the hub's interceptors, an internal error reaches a gRPC client as
// codes.Internal naming the request id it gets in the audit-id response header, and the log line with that id has
// the detail; a unary call and a stream alike. A client's own id is kept; a mapped error passes unchanged.
func TestGRPCInternalErrorHasRequestID(t *testing.T) {
	logs := &logBuffer{}
	client, ctx := serveIntercepted(t, newMetrics(), logs, failingHealth{})

	check := func(name string, err error, header metadata.MD, wantID string) {
		t.Helper()
		ids := header.Get("audit-id")
		if len(ids) != 1 || ids[0] == "" || (wantID != "" && ids[0] != wantID) {
			t.Fatalf("%s: audit-id header %q, want one id (%q)", name, ids, wantID)
		}
		st := status.Convert(err)
		if st.Code() != codes.Internal || !strings.Contains(st.Message(), ids[0]) || strings.Contains(st.Message(), "permission denied") {
			t.Errorf("%s: %v, want Internal naming %s without the detail", name, err, ids[0])
		}
		for _, d := range st.Details() {
			if strings.Contains(strings.ToLower(d.(interface{ String() string }).String()), "permission denied") {
				t.Errorf("%s: a status detail holds the detail: %v", name, d)
			}
		}
		if !strings.Contains(logs.String(), "requestID="+ids[0]) || !strings.Contains(logs.String(), "permission denied") {
			t.Errorf("%s: no log line with id %s and the detail: %s", name, ids[0], logs.String())
		}
	}

	var header metadata.MD
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
	check("unary", err, header, "")

	header = nil
	sctx := metadata.AppendToOutgoingContext(ctx, "audit-id", "client-chosen-1")
	stream, err := client.Watch(sctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	header, _ = stream.Header()
	check("stream", err, header, "client-chosen-1")

	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{Service: "missing"})
	if status.Code(err) != codes.NotFound || !strings.Contains(status.Convert(err).Message(), `"missing" not found`) {
		t.Errorf("a NotFound became %v", err)
	}
}

// TestRESTInternalErrorHasRequestID: through the hub's request ids and the REST gateway, an internal error reaches
// a REST client as Kubernetes' InternalError Status (500) naming the id of its Audit-Id response header, and the log
// line with that id has the detail. A client's own id is kept; a mapped error passes unchanged.
func TestRESTInternalErrorHasRequestID(t *testing.T) {
	logs := &logBuffer{}
	errs := api.Errors{Log: slog.New(slog.NewTextHandler(logs, nil))}
	rest, err := gateway.New(t.Context(), gateway.Config{PublicError: errs.Public, Routes: []func(context.Context, *runtime.ServeMux) error{
		func(_ context.Context, mux *runtime.ServeMux) error {
			return mux.HandlePath(http.MethodGet, "/apis/test/{name}", func(w http.ResponseWriter, r *http.Request, p map[string]string) {
				err := failingHealth{}.fail(p["name"])
				runtime.HTTPError(r.Context(), mux, &runtime.JSONPb{}, w, r, err)
			})
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(withRequestID(rest))
	t.Cleanup(srv.Close)

	get := func(path, sentID string) (int, http.Header, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
		if sentID != "" {
			req.Header.Set("Audit-Id", sentID)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var st map[string]any
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatalf("%s: %v: %s", path, err, body)
		}
		return resp.StatusCode, resp.Header, st
	}
	for _, sent := range []string{"", "client-chosen-2"} {
		code, header, st := get("/apis/test/x", sent)
		id := header.Get("Audit-Id")
		msg, _ := st["message"].(string)
		if code != 500 || st["reason"] != "InternalError" || st["kind"] != "Status" || id == "" || (sent != "" && id != sent) {
			t.Errorf("sent id %q: %d %v, Audit-Id %q", sent, code, st, id)
		}
		if !strings.Contains(msg, id) || strings.Contains(msg, "permission denied") || st["details"] != nil {
			t.Errorf("sent id %q: the Status %v does not name %s only", sent, st, id)
		}
		if !strings.Contains(logs.String(), "requestID="+id) || !strings.Contains(logs.String(), secretDetail) {
			t.Errorf("no log line with id %s and the detail: %s", id, logs.String())
		}
	}
	code, header, st := get("/apis/test/missing", "")
	if code != 404 || st["reason"] != "NotFound" || header.Get("Audit-Id") == "" {
		t.Errorf("a NotFound became %d %v (Audit-Id %q)", code, st, header.Get("Audit-Id"))
	}
}
