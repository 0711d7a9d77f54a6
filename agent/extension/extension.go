package extension

import (
	"context"
	"errors"
	"fmt"
	"github.com/trellis-dev/trellis/tracing"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/trellis-dev/trellis/agent/flow"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// CodedError is an error an extension reported, with its error codes; the shoot's lastErrors carry the codes.
type CodedError struct {
	err   error
	codes []string
}

func (e *CodedError) Error() string { return e.err.Error() }
func (e *CodedError) Unwrap() error { return e.err }

// Codes returns the error codes.
func (e *CodedError) Codes() []string { return e.codes }

// WithCodes returns err carrying codes (e.g. from a core object's lastError), for Codes to find.
func WithCodes(err error, codes ...string) error { return &CodedError{err: err, codes: codes} }

// lastError is the error an extension object reports, with its codes; nil when it reports none.
func lastError(obj extensionsv1alpha1.Object, what string) error {
	le := obj.GetExtensionStatus().LastError
	if le == nil {
		return nil
	}
	codes := make([]string, len(le.Codes))
	for i, c := range le.Codes {
		codes[i] = string(c)
	}
	return &CodedError{err: fmt.Errorf("%s %s: %s", Describe(obj), what, le.Description), codes: codes}
}

// Codes collects the error codes in err's tree, sorted and without duplicates.
func Codes(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if c, ok := err.(interface{ Codes() []string }); ok {
			out = append(out, c.Codes()...)
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	slices.Sort(out)
	return slices.Compact(out)
}

// nonRetryableCodes are the error codes that stop automatic retries of a shoot (Gardener's non-retryable codes).
var nonRetryableCodes = map[string]bool{
	string(extensionsv1alpha1.ErrorInfraUnauthenticated): true,
	string(extensionsv1alpha1.ErrorInfraUnauthorized):    true,
	string(extensionsv1alpha1.ErrorInfraQuotaExceeded):   true,
	string(extensionsv1alpha1.ErrorInfraDependencies):    true,
	string(extensionsv1alpha1.ErrorConfigurationProblem): true,
	string(extensionsv1alpha1.ErrorProblematicWebhook):   true,
}

// HasNonRetryable reports whether codes hold one that stops automatic retries.
func HasNonRetryable(codes []string) bool {
	for _, c := range codes {
		if nonRetryableCodes[c] {
			return true
		}
	}
	return false
}

// Client writes and waits for extension objects in the seed.
type Client struct {
	// C is the seed client; reads should come from an informer cache, as waits poll.
	C client.Client
	// Now is the clock of the timestamps; nil uses time.Now.
	Now func() time.Time
	// Interval is the poll interval of waits; 0 means 100 ms.
	Interval time.Duration
	// ErrorThreshold is how long an extension may report an error for the current request before a wait gives up on
	// it (Gardener's severe threshold), so that the extension's own retries get a chance; 0 means at once.
	ErrorThreshold time.Duration
}

func (e *Client) now() time.Time {
	if e.Now == nil {
		return time.Now()
	}
	return e.Now()
}

func (e *Client) interval() time.Duration {
	if e.Interval <= 0 {
		return 100 * time.Millisecond
	}
	return e.Interval
}

// KindOf is the kind of an object, from its Go type.
func KindOf(obj runtime.Object) string {
	t := fmt.Sprintf("%T", obj)
	return t[strings.LastIndex(t, ".")+1:]
}

// Describe names an object for messages: "<Kind> <namespace>/<name>".
func Describe(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return KindOf(obj) + " " + obj.GetName()
	}
	return KindOf(obj) + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// deploy creates or updates obj (named by its metadata) with the spec that mutate sets, annotated with
// gardener.cloud/operation=op and a fresh gardener.cloud/timestamp. It returns the timestamp.
func (e *Client) Deploy(ctx context.Context, obj extensionsv1alpha1.Object, op string, mutate func()) (time.Time, error) {
	var ts time.Time
	_, err := controllerutil.CreateOrUpdate(ctx, e.C, obj, func() error {
		var err error
		if ts, err = e.requestTime(ctx, obj); err != nil {
			return err
		}
		mutate()
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[extensionsv1alpha1.AnnotationOperation] = op
		ann[extensionsv1alpha1.AnnotationTimestamp] = ts.Format(time.RFC3339Nano)
		// The extension continues the request's trace (docs/extensions.md); no trace, no stale one either.
		if tp := tracing.Traceparent(ctx); tp != "" {
			ann[tracing.Annotation] = tp
		} else {
			delete(ann, tracing.Annotation)
		}
		obj.SetAnnotations(ann)
		return nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("deploy %s: %w", Describe(obj), err)
	}
	return ts, nil
}

// requestTime is the timestamp of a new request for obj. Extensions write lastUpdateTime in whole seconds, so a
// request in the same second as the object's last update could be mistaken as answered by it; such a request waits
// for the next second.
func (e *Client) requestTime(ctx context.Context, obj extensionsv1alpha1.Object) (time.Time, error) {
	ts := e.now().UTC()
	lo := obj.GetExtensionStatus().LastOperation
	if lo == nil || ts.Truncate(time.Second).After(lo.LastUpdateTime.Time) {
		return ts, nil
	}
	wait := lo.LastUpdateTime.Time.Truncate(time.Second).Add(time.Second).Sub(ts)
	if wait > time.Second {
		wait = time.Second // the extension's clock is ahead; its lastUpdateTime follows our timestamp anyway
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-t.C:
	}
	return e.now().UTC(), nil
}

// annotate sets the operation annotation (and a fresh timestamp) on an existing object.
func (e *Client) Annotate(ctx context.Context, obj extensionsv1alpha1.Object, op string) (time.Time, error) {
	ts, err := e.requestTime(ctx, obj)
	if err != nil {
		return time.Time{}, err
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`,
		extensionsv1alpha1.AnnotationOperation, op, extensionsv1alpha1.AnnotationTimestamp, ts.Format(time.RFC3339Nano))
	if err := e.C.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return time.Time{}, fmt.Errorf("annotate %s with %s: %w", Describe(obj), op, err)
	}
	return ts, nil
}

// NotReady is a readiness check's answer: why the object is not ready yet.
type NotReady struct{ reason string }

func (n *NotReady) Error() string { return n.reason }

// checkReady is Gardener's readiness rule for extension objects: no lastError, the generation observed, no
// operation annotation, lastOperation Succeeded, and updated at or after the timestamp annotation (truncated to the
// second, as the extensions write seconds). wantType, when set, is the lastOperation type required (Migrate).
// It returns nil, a *NotReady, or the extension's error as a *CodedError.
func CheckReady(obj extensionsv1alpha1.Object, wantType extensionsv1alpha1.LastOperationType) error {
	st := obj.GetExtensionStatus()
	if err := lastError(obj, "reports an error"); err != nil {
		return err
	}
	if st.ObservedGeneration != obj.GetGeneration() {
		return &NotReady{fmt.Sprintf("%s: observed generation %d of %d", Describe(obj), st.ObservedGeneration, obj.GetGeneration())}
	}
	if op, ok := obj.GetAnnotations()[extensionsv1alpha1.AnnotationOperation]; ok {
		return &NotReady{fmt.Sprintf("%s: operation %q not yet picked up", Describe(obj), op)}
	}
	lo := st.LastOperation
	if lo == nil {
		return &NotReady{Describe(obj) + ": no lastOperation yet"}
	}
	if wantType != "" && lo.Type != wantType {
		return &NotReady{fmt.Sprintf("%s: last operation is %s, waiting for %s", Describe(obj), lo.Type, wantType)}
	}
	if lo.State != extensionsv1alpha1.LastOperationStateSucceeded {
		return &NotReady{fmt.Sprintf("%s: last operation %s %s", Describe(obj), lo.Type, lo.State)}
	}
	if s, ok := obj.GetAnnotations()[extensionsv1alpha1.AnnotationTimestamp]; ok {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return &NotReady{fmt.Sprintf("%s: invalid %s %q", Describe(obj), extensionsv1alpha1.AnnotationTimestamp, s)}
		}
		if lo.LastUpdateTime.Time.Before(ts.Truncate(time.Second)) {
			return &NotReady{fmt.Sprintf("%s: last operation %s is older than the request at %s", Describe(obj), lo.LastUpdateTime.UTC().Format(time.RFC3339), ts.Format(time.RFC3339))}
		}
	}
	return nil
}

// waitReady polls obj until it is ready (see checkReady) and leaves the last state read in obj. An extension that
// keeps reporting an error for longer than the error threshold fails the wait with its error and codes at once
// (permanently for this flow run, so that the shoot shows the error); non-retryable codes fail it at once.
func (e *Client) WaitReady(ctx context.Context, obj extensionsv1alpha1.Object, wantType extensionsv1alpha1.LastOperationType) error {
	key := client.ObjectKeyFromObject(obj)
	// The request this wait is for: the timestamp obj carries as written. A read from the informer cache may still
	// show the object from before the request, which would look ready by the last request's answer.
	requested, _ := time.Parse(time.RFC3339Nano, obj.GetAnnotations()[extensionsv1alpha1.AnnotationTimestamp])
	var errSince time.Time
	var last error
	for {
		err := e.C.Get(ctx, key, obj)
		switch {
		case apierrors.IsNotFound(err):
			last = fmt.Errorf("%s not found", Describe(obj))
		case err != nil:
			last = fmt.Errorf("read %s: %w", Describe(obj), err)
		case !seenRequest(obj, requested):
			last = &NotReady{Describe(obj) + ": the request is not visible yet"}
		default:
			last = CheckReady(obj, wantType)
			if last == nil {
				return nil
			}
			var ce *CodedError
			if errors.As(last, &ce) {
				if errSince.IsZero() {
					errSince = e.now()
				}
				if HasNonRetryable(ce.codes) || e.now().Sub(errSince) >= e.ErrorThreshold {
					return flow.Permanent(last)
				}
			} else {
				errSince = time.Time{}
			}
		}
		t := time.NewTimer(e.interval())
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for %s: %w (%w)", Describe(obj), last, ctx.Err())
		case <-t.C:
		}
	}
}

// destroy deletes obj, confirming the deletion with confirmation.gardener.cloud/deletion=true as Gardener's
// resource manager requires. A missing object is fine.
func (e *Client) Destroy(ctx context.Context, obj extensionsv1alpha1.Object) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, extensionsv1alpha1.AnnotationConfirmDeletion)
	if err := e.C.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("confirm deletion of %s: %w", Describe(obj), err)
	}
	if err := e.C.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", Describe(obj), err)
	}
	return nil
}

// waitGone polls until obj is gone. An extension that reports an error while deleting fails the wait after the error
// threshold, with its codes.
func (e *Client) WaitGone(ctx context.Context, obj extensionsv1alpha1.Object) error {
	key := client.ObjectKeyFromObject(obj)
	var errSince time.Time
	for {
		err := e.C.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		last := fmt.Errorf("%s still exists", Describe(obj))
		if err != nil {
			last = fmt.Errorf("read %s: %w", Describe(obj), err)
		} else if le := lastError(obj, "reports an error while deleting"); le != nil && obj.GetDeletionTimestamp() != nil {
			last = le
			if errSince.IsZero() {
				errSince = e.now()
			}
			if e.now().Sub(errSince) >= e.ErrorThreshold {
				return flow.Permanent(last)
			}
		}
		t := time.NewTimer(e.interval())
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for %s to be deleted: %w (%w)", Describe(obj), last, ctx.Err())
		case <-t.C:
		}
	}
}

// destroyAndWait deletes obj and waits until it is gone.
func (e *Client) DestroyAndWait(ctx context.Context, obj extensionsv1alpha1.Object) error {
	if err := e.Destroy(ctx, obj); err != nil {
		return err
	}
	return e.WaitGone(ctx, obj)
}

// migrate annotates obj with migrate and waits until the extension reports Migrate Succeeded. A missing object has
// nothing to migrate.
func (e *Client) Migrate(ctx context.Context, obj extensionsv1alpha1.Object) error {
	if err := e.C.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("read %s: %w", Describe(obj), err)
	}
	if lo := obj.GetExtensionStatus().LastOperation; lo == nil || lo.Type != extensionsv1alpha1.LastOperationTypeMigrate ||
		lo.State != extensionsv1alpha1.LastOperationStateSucceeded || obj.GetAnnotations()[extensionsv1alpha1.AnnotationOperation] != "" {
		if _, err := e.Annotate(ctx, obj, extensionsv1alpha1.OperationMigrate); err != nil {
			return err
		}
	}
	return e.WaitReady(ctx, obj, extensionsv1alpha1.LastOperationTypeMigrate)
}

// seenRequest reports whether obj carries the request made at requested (or a later one); a zero requested time
// asks for nothing.
func seenRequest(obj extensionsv1alpha1.Object, requested time.Time) bool {
	if requested.IsZero() {
		return true
	}
	ts, err := time.Parse(time.RFC3339Nano, obj.GetAnnotations()[extensionsv1alpha1.AnnotationTimestamp])
	return err == nil && !ts.Before(requested)
}
