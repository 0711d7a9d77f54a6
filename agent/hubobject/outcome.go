package hubobject

import (
	"context"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/agent/extension"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// States of a lastOperation, as Gardener spells them.
const (
	StateProcessing = "Processing"
	StateSucceeded  = "Succeeded"
	StateError      = "Error"
)

// Outcome is what a controller reports on a core object: its lastOperation and lastError.
type Outcome struct {
	// Type, State, Description and Progress make the lastOperation.
	Type, State, Description string
	Progress                 int32
	// Err becomes lastError; nil removes it.
	Err *LastError
}

// LastError is what a controller reports as a core object's lastError.
type LastError struct {
	Description string
	Codes       []string
}

// ErrorOf is err as a LastError, with the error codes in its tree (an extension's *extension.CodedError).
func ErrorOf(err error) *LastError {
	return &LastError{Description: err.Error(), Codes: extension.Codes(err)}
}

// ExtensionLastError is the lastError an extension object reports, as a LastError of the core object.
func ExtensionLastError(le *extensionsv1alpha1.LastError) *LastError {
	codes := make([]string, len(le.Codes))
	for i, c := range le.Codes {
		codes[i] = string(c)
	}
	return &LastError{Description: le.Description, Codes: codes}
}

// Processing is operation typ under way, described by description.
func Processing(typ, description string) Outcome {
	return Outcome{Type: typ, State: StateProcessing, Description: description}
}

// Failed is operation typ failed with err, which describes it, at 50 %.
func Failed(typ string, err *LastError) Outcome {
	return Outcome{Type: typ, State: StateError, Progress: 50, Description: err.Description, Err: err}
}

// Succeeded is operation typ done, described by description.
func Succeeded(typ, description string) Outcome {
	return Outcome{Type: typ, State: StateSucceeded, Progress: 100, Description: description}
}

// Status is the part of a core object's status that an Outcome is reported in.
type Status interface {
	GetLastOperation() *metav1.LastOperation
	GetLastError() *metav1.LastError
}

// reportedIn reports whether st says o already: the lastOperation's type, state and description, and the lastError.
func (o Outcome) reportedIn(st Status) bool {
	lo := st.GetLastOperation()
	if lo == nil || lo.GetType() != o.Type || lo.GetState() != o.State || lo.GetDescription() != o.Description {
		return false
	}
	le := st.GetLastError()
	if o.Err == nil {
		return le == nil
	}
	return le != nil && le.GetDescription() == o.Err.Description && slices.Equal(le.GetCodes(), o.Err.Codes)
}

// fields is o as the status fields of a merge patch, updated at now.
func (o Outcome) fields(now time.Time) map[string]any {
	ts := timestamppb.New(now.UTC().Truncate(time.Second))
	f := map[string]any{
		"lastOperation": JSON(&metav1.LastOperation{Type: o.Type, State: o.State, Progress: proto.Int32(o.Progress),
			Description: o.Description, LastUpdateTime: ts}),
		"lastError": nil,
	}
	if o.Err != nil {
		f["lastError"] = JSON(&metav1.LastError{Description: o.Err.Description, Codes: o.Err.Codes, LastUpdateTime: ts})
	}
	return f
}

// Report writes o, and the further status fields in extra (as PatchStatus takes them), to obj's status, whose
// current state is st; unless st says o already and there is nothing extra. It returns obj as the hub has it after
// the write.
func (c *Client[T]) Report(ctx context.Context, obj T, st Status, o Outcome, extra map[string]any) (T, error) {
	if len(extra) == 0 && o.reportedIn(st) {
		return obj, nil
	}
	f := o.fields(c.now())
	maps.Copy(f, extra)
	return c.PatchStatus(ctx, obj, f)
}
