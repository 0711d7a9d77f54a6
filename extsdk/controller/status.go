package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// The status protocol (Gardener's StatusUpdater): Processing at 1 % when an operation starts; Succeeded at 100 %
// with no lastError, or Error at 50 % with lastError and its codes, both with observedGeneration. Every write is a
// merge patch of the status subresource, so it never conflicts and leaves the fields it does not change (conditions
// written by health checks, for one) alone.

// processing reports that op started.
func (r *reconciler[T]) processing(ctx context.Context, obj T, op extensionsv1alpha1.LastOperationType, description string) error {
	base := copyOf(obj)
	obj.GetExtensionStatus().LastOperation = &extensionsv1alpha1.LastOperation{
		Type:           op,
		State:          extensionsv1alpha1.LastOperationStateProcessing,
		Progress:       1,
		Description:    description,
		LastUpdateTime: metav1.NewTime(r.now(obj)),
	}
	if err := r.client.Status().Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("report %s processing: %w", op, err)
	}
	return nil
}

// succeeded reports that op succeeded. base is the object before the actuator ran: the patch carries the status
// fields the actuator set along with the last operation.
func (r *reconciler[T]) succeeded(ctx context.Context, log logr.Logger, obj, base T, op extensionsv1alpha1.LastOperationType, description string) error {
	st := obj.GetExtensionStatus()
	st.ObservedGeneration = obj.GetGeneration()
	st.LastError = nil
	st.LastOperation = &extensionsv1alpha1.LastOperation{
		Type:           op,
		State:          extensionsv1alpha1.LastOperationStateSucceeded,
		Progress:       100,
		Description:    description,
		LastUpdateTime: metav1.NewTime(r.now(obj)),
	}
	if err := r.client.Status().Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("report %s success: %w", op, err)
	}
	log.Info(description)
	return nil
}

// errored reports that op failed with err. Like succeeded it also writes what the actuator set before it failed (a
// partial state is better kept than lost).
func (r *reconciler[T]) errored(ctx context.Context, obj, base T, op extensionsv1alpha1.LastOperationType, description string, err error) error {
	message := capitalize(fmt.Sprintf("%s: %v", description, err))
	codes := extsdk.Codes(err)
	for _, c := range extsdk.MatchCodes(err.Error(), r.args.KnownCodes) {
		if !slices.Contains(codes, c) {
			codes = append(codes, c)
		}
	}
	now := metav1.NewTime(r.now(obj))
	st := obj.GetExtensionStatus()
	st.ObservedGeneration = obj.GetGeneration()
	st.LastOperation = &extensionsv1alpha1.LastOperation{
		Type:           op,
		State:          extensionsv1alpha1.LastOperationStateError,
		Progress:       50,
		Description:    message,
		LastUpdateTime: now,
	}
	st.LastError = &extensionsv1alpha1.LastError{Description: message, Codes: codes, LastUpdateTime: &now}
	if err := r.client.Status().Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("report %s error: %w", op, err)
	}
	return nil
}

// capitalize upper-cases the first letter, as Gardener formats lastError descriptions.
func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || unicode.IsUpper(r) {
		return s
	}
	return strings.ToUpper(s[:n]) + s[n:]
}
