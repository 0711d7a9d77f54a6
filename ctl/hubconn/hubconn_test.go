package hubconn

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func TestError(t *testing.T) {
	hub, err := status.New(codes.PermissionDenied, "rpc-level text").WithDetails(&metav1.Status{Message: `shoots "x" is forbidden: no`, Reason: "Forbidden", Code: 403})
	if err != nil {
		t.Fatal(err)
	}
	var se *StatusError
	if got := Error(fmt.Errorf("wrapped: %w", hub.Err())); !errors.As(got, &se) || se.Error() != `shoots "x" is forbidden: no` || se.Reason() != "Forbidden" || !IsForbidden(got) {
		t.Fatalf("with a Status detail: %v", got)
	}
	if got := Error(status.Error(codes.NotFound, "gone")); !IsNotFound(got) || got.Error() != "gone" {
		t.Fatalf("without a detail: %v", got)
	}
	var un *UnreachableError
	if got := Error(status.Error(codes.Unavailable, "connection refused")); !errors.As(got, &un) || got.Error() != "cannot reach the hub: connection refused" {
		t.Fatalf("unavailable: %v", got)
	}
	if Error(io.EOF) != io.EOF || Error(nil) != nil {
		t.Fatal("io.EOF and nil must pass through")
	}
	if IsAlreadyExists(io.EOF) || Reason(errors.New("x")) != "" {
		t.Fatal("other errors have no reason")
	}
}
