package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/gateway"
)

// TestErrorsPublic: errors nothing mapped and InternalErrors reach clients as a generic InternalError naming the
// request id, and the log line with that id holds the detail; errors meant for clients pass unchanged.
func TestErrorsPublic(t *testing.T) {
	const detail = "dial tcp 10.20.30.40:2379: connect: connection refused"
	internal := []error{
		errors.New(detail),
		fmt.Errorf("read seed: %w", errors.New(detail)),
		apierrors.NewInternalError(errors.New(detail)),
		status.Error(codes.Internal, detail),
		status.Error(codes.Unknown, detail),
	}
	for i, in := range internal {
		var logs bytes.Buffer
		e := Errors{Log: slog.New(slog.NewTextHandler(&logs, nil))}
		id := fmt.Sprintf("req-%d", i)
		out := e.Public(WithRequestID(context.Background(), id), in)
		var se *apierrors.StatusError
		if !errors.As(out, &se) {
			t.Fatalf("%v: got %T %v, want a StatusError", in, out, out)
		}
		s := se.ErrStatus
		if s.Code != http.StatusInternalServerError || s.Reason != kmetav1.StatusReasonInternalError || s.Status != kmetav1.StatusFailure {
			t.Errorf("%v: status %d %s %s, want 500 InternalError Failure", in, s.Code, s.Reason, s.Status)
		}
		if strings.Contains(s.Message, "10.20.30.40") || s.Details != nil {
			t.Errorf("%v: the client sees the detail: %+v", in, s)
		}
		if !strings.Contains(s.Message, id) {
			t.Errorf("%v: message %q does not name the request id %s", in, s.Message, id)
		}
		line := logs.String()
		if !strings.Contains(line, "requestID="+id) || !strings.Contains(line, "10.20.30.40:2379") {
			t.Errorf("%v: log line %q lacks the id or the detail", in, line)
		}
		// The gRPC edge: codes.Internal with the same message, and the Status for the REST gateway.
		g := ToGRPC(out)
		if status.Code(g) != codes.Internal || !strings.Contains(status.Convert(g).Message(), id) || strings.Contains(g.Error(), "10.20.30.40") {
			t.Errorf("%v: gRPC error %v, want Internal naming %s without the detail", in, g, id)
		}
		if st := gateway.StatusOf(g); st.GetCode() != 500 || st.GetReason() != "InternalError" || !strings.Contains(st.GetMessage(), id) {
			t.Errorf("%v: REST status %v", in, st)
		}
	}

	public := []error{
		apierrors.NewNotFound(schema.GroupResource{Group: "core.gardener.cloud", Resource: "shoots"}, "x"),
		apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, "s", errors.New("the object has been modified")),
		apierrors.NewServiceUnavailable("etcd is starting"),
		status.Error(codes.PermissionDenied, "not your seed"),
		context.Canceled,
		fmt.Errorf("watch: %w", context.DeadlineExceeded),
	}
	for _, in := range public {
		var logs bytes.Buffer
		e := Errors{Log: slog.New(slog.NewTextHandler(&logs, nil))}
		if out := e.Public(WithRequestID(context.Background(), "r"), in); out != in {
			t.Errorf("%v: changed to %v", in, out)
		}
		if logs.Len() > 0 {
			t.Errorf("%v: logged %q", in, logs.String())
		}
	}
	if (Errors{}).Public(context.Background(), nil) != nil {
		t.Error("nil error changed")
	}
}

// TestErrorsPublicWithoutRequestID: an internal error outside a request still gets an id, the same in the log line
// and in the message.
func TestErrorsPublicWithoutRequestID(t *testing.T) {
	var logs bytes.Buffer
	e := Errors{Log: slog.New(slog.NewTextHandler(&logs, nil))}
	out := e.Public(context.Background(), errors.New("boom"))
	msg := out.Error()
	_, after, ok := strings.Cut(logs.String(), "requestID=")
	id, _, _ := strings.Cut(after, " ")
	if !ok || id == "" || !strings.Contains(msg, id) {
		t.Errorf("message %q and log %q do not share an id", msg, logs.String())
	}
}

func TestRequestIDOf(t *testing.T) {
	for _, sent := range []string{"abc-123", "0f0e:trace.1_x", strings.Repeat("a", 64)} {
		if got := RequestIDOf(sent); got != sent {
			t.Errorf("RequestIDOf(%q) = %q, want it kept", sent, got)
		}
	}
	for _, sent := range []string{"", "has space", "new\nline", strings.Repeat("a", 65), "<script>"} {
		got := RequestIDOf(sent)
		if got == sent || len(got) != 36 {
			t.Errorf("RequestIDOf(%q) = %q, want a new UUID", sent, got)
		}
	}
	if a, b := RequestIDOf(""), RequestIDOf(""); a == b {
		t.Error("two new ids are equal")
	}
}

// FuzzRequestIDOf: whatever a client sends as its request id, the id used is what it sent when that is a safe id,
// and a new UUID otherwise; it is never empty, never longer than 64 bytes, and holds no character a log line or a
// header could be broken with.
func FuzzRequestIDOf(f *testing.F) {
	for _, s := range []string{"", "abc-123", "has space", "a\r\nX-Evil: 1", strings.Repeat("z", 65), "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sent string) {
		id := RequestIDOf(sent)
		if id == "" || len(id) > 64 {
			t.Fatalf("RequestIDOf(%q) = %q", sent, id)
		}
		if id != sent && len(id) != 36 {
			t.Fatalf("RequestIDOf(%q) = %q: neither what was sent nor a UUID", sent, id)
		}
		for _, c := range id {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.:", c)) {
				t.Fatalf("RequestIDOf(%q) = %q holds %q", sent, id, c)
			}
		}
	})
}
