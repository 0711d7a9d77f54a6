package extsdk_test

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

func TestCodes(t *testing.T) {
	if extsdk.WithCodes(nil, extensionsv1alpha1.ErrorInfraUnauthorized) != nil {
		t.Error("WithCodes(nil) is not nil")
	}
	base := errors.New("403 from the cloud")
	coded := extsdk.WithCodes(base, extensionsv1alpha1.ErrorInfraUnauthorized)
	if coded.Error() != base.Error() || !errors.Is(coded, base) {
		t.Errorf("WithCodes changed the error: %v", coded)
	}
	err := fmt.Errorf("reconcile: %w", errors.Join(
		fmt.Errorf("network: %w", coded),
		extsdk.WithCodes(errors.New("quota"), extensionsv1alpha1.ErrorInfraQuotaExceeded, extensionsv1alpha1.ErrorInfraUnauthorized),
		errors.New("no codes"),
	))
	want := []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorInfraUnauthorized, extensionsv1alpha1.ErrorInfraQuotaExceeded}
	if got := extsdk.Codes(err); !slices.Equal(got, want) {
		t.Errorf("Codes = %v, want %v", got, want)
	}
	if got := extsdk.Codes(errors.New("plain")); got != nil {
		t.Errorf("Codes of a plain error = %v", got)
	}
	// Through a RequeueAfterError too.
	if got := extsdk.Codes(extsdk.RequeueAfter(time.Second, coded)); !slices.Equal(got, want[:1]) {
		t.Errorf("Codes through RequeueAfter = %v", got)
	}
}

func TestMatchCodes(t *testing.T) {
	patterns := []extsdk.CodePattern{
		{Code: extensionsv1alpha1.ErrorInfraRateLimitsExceeded, Pattern: regexp.MustCompile(`(?i)throttl`)},
		{Code: extensionsv1alpha1.ErrorInfraUnauthorized, Pattern: regexp.MustCompile(`(?i)access denied`)},
		{Code: extensionsv1alpha1.ErrorInfraRateLimitsExceeded, Pattern: regexp.MustCompile(`TooMany`)},
		{Code: extensionsv1alpha1.ErrorInfraDependencies}, // no pattern: never matches
	}
	got := extsdk.MatchCodes("Throttling: TooManyRequests; Access Denied", patterns)
	want := []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorInfraRateLimitsExceeded, extensionsv1alpha1.ErrorInfraUnauthorized}
	if !slices.Equal(got, want) {
		t.Errorf("MatchCodes = %v, want %v", got, want)
	}
}

func TestRequeueAfter(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", extsdk.RequeueAfter(2*time.Second, errors.New("not yet")))
	r := extsdk.AsRequeueAfter(err)
	if r == nil || r.RequeueAfter != 2*time.Second || r.Cause.Error() != "not yet" {
		t.Fatalf("AsRequeueAfter = %+v", r)
	}
	if r.Error() != "requeue in 2s: not yet" {
		t.Errorf("message %q", r.Error())
	}
	if extsdk.AsRequeueAfter(errors.New("plain")) != nil {
		t.Error("a plain error is a RequeueAfterError")
	}
}
