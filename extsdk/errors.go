package extsdk

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// codedError carries error codes for an error it wraps.
type codedError struct {
	err   error
	codes []extensionsv1alpha1.ErrorCode
}

// Error returns the wrapped error's message.
func (e *codedError) Error() string { return e.err.Error() }

// Unwrap returns the wrapped error.
func (e *codedError) Unwrap() error { return e.err }

// Codes returns the codes attached to the error.
func (e *codedError) Codes() []extensionsv1alpha1.ErrorCode { return e.codes }

// WithCodes returns err with codes attached; its message is err's. The reconciler puts the codes of every error in
// the chain (see Codes) into status.lastError.codes, from where the agent copies them to the Shoot's lastErrors. A nil
// err stays nil.
func WithCodes(err error, codes ...extensionsv1alpha1.ErrorCode) error {
	if err == nil {
		return nil
	}
	return &codedError{err: err, codes: codes}
}

// Codes returns the codes of err and of every error it wraps (%w, errors.Join), each once, in the order found. An
// error carries codes when it has a method Codes() []extensionsv1alpha1.ErrorCode, as the errors of WithCodes do.
func Codes(err error) []extensionsv1alpha1.ErrorCode {
	var out []extensionsv1alpha1.ErrorCode
	walk(err, func(e error) {
		if c, ok := e.(interface {
			Codes() []extensionsv1alpha1.ErrorCode
		}); ok {
			for _, code := range c.Codes() {
				if !slices.Contains(out, code) {
					out = append(out, code)
				}
			}
		}
	})
	return out
}

// walk calls f for err and every error below it, depth first.
func walk(err error, f func(error)) {
	if err == nil {
		return
	}
	f(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walk(u.Unwrap(), f)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walk(e, f)
		}
	}
}

// CodePattern gives an error code to errors whose message matches Pattern: for errors of cloud SDKs that carry no
// codes of their own, e.g. {ERR_INFRA_UNAUTHORIZED, `(?i)(Unauthorized|AccessDenied)`}.
type CodePattern struct {
	// Code is the code to give.
	Code extensionsv1alpha1.ErrorCode
	// Pattern is matched against the whole error message.
	Pattern *regexp.Regexp
}

// MatchCodes returns the codes of the patterns matching message, each once, in the order of patterns.
func MatchCodes(message string, patterns []CodePattern) []extensionsv1alpha1.ErrorCode {
	var out []extensionsv1alpha1.ErrorCode
	for _, p := range patterns {
		if p.Pattern != nil && p.Pattern.MatchString(message) && !slices.Contains(out, p.Code) {
			out = append(out, p.Code)
		}
	}
	return out
}

// RequeueAfterError asks the reconciler to try again after a fixed delay instead of with the controller's growing
// backoff: for "not yet" conditions such as waiting for a cloud resource. The operation is still reported as Error
// with Cause, as Gardener's reconcilers do.
type RequeueAfterError struct {
	// Cause says why; it may carry codes.
	Cause error
	// RequeueAfter is the delay.
	RequeueAfter time.Duration
}

// RequeueAfter returns a *RequeueAfterError.
func RequeueAfter(d time.Duration, cause error) error {
	return &RequeueAfterError{Cause: cause, RequeueAfter: d}
}

// Error says the delay and the cause.
func (e *RequeueAfterError) Error() string {
	if e.Cause == nil {
		return fmt.Sprintf("requeue in %v", e.RequeueAfter)
	}
	return fmt.Sprintf("requeue in %v: %v", e.RequeueAfter, e.Cause)
}

// Unwrap returns the cause.
func (e *RequeueAfterError) Unwrap() error { return e.Cause }

// AsRequeueAfter returns the first *RequeueAfterError in err's chain, or nil.
func AsRequeueAfter(err error) *RequeueAfterError {
	var r *RequeueAfterError
	if errors.As(err, &r) {
		return r
	}
	return nil
}
