package audit

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"

	"github.com/trellis-dev/trellis/hub/api"
)

// authorized takes the first authorization's attributes as what the request is about and emits RequestReceived
// (and ResponseStarted for watches, whose response runs until the watch ends).
func (rec *record) authorized(at api.Attributes) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.received {
		return
	}
	if rec.ev.User.Username == "" {
		rec.setUser(at.User)
	}
	rec.attrs.Verb, rec.ev.Verb = at.Verb, at.Verb
	rec.attrs.ResourceRequest, rec.attrs.Path = true, ""
	rec.attrs.APIGroup, rec.attrs.Resource, rec.attrs.Subresource = at.Resource.Group, at.Resource.Resource, at.Subresource
	rec.attrs.Namespace, rec.attrs.Name = at.Namespace, at.Name
	rec.ev.ObjectRef = &auditinternal.ObjectReference{
		Resource: at.Resource.Resource, Namespace: at.Namespace, Name: at.Name, APIGroup: at.Resource.Group,
		APIVersion: rec.attrs.APIVersion, Subresource: at.Subresource,
	}
	if at.Current != nil {
		rec.ev.ObjectRef.UID = types.UID(at.Current.GetMetadata().GetUid())
		rec.ev.ObjectRef.ResourceVersion = at.Current.GetMetadata().GetResourceVersion()
	}
	rec.evaluate()
	if at.Object != nil && rec.level.GreaterOrEqual(auditinternal.LevelRequest) {
		rec.ev.RequestObject = rec.a.unknown(at.Object)
	}
	rec.receivedLocked()
	if at.Verb == api.VerbWatch {
		rec.emit(auditinternal.StageResponseStarted)
	}
}

// evaluate chooses the level and omitted stages from the attributes known now; secrets get Metadata at most.
func (rec *record) evaluate() {
	cfg := rec.a.eval.EvaluatePolicyRule(&rec.attrs)
	rec.level, rec.omit = cfg.Level, cfg.OmitStages
	if (secretResources[rec.attrs.Resource] || secretSubresources[rec.attrs.Resource+"/"+rec.attrs.Subresource]) && rec.level.GreaterOrEqual(auditinternal.LevelRequest) {
		rec.level = auditinternal.LevelMetadata
	}
	rec.ev.Level = rec.level
}

// receivedLocked emits RequestReceived once, evaluating the policy first if no authorization did.
func (rec *record) receivedLocked() {
	if rec.received {
		return
	}
	if rec.ev.Level == "" {
		rec.evaluate()
	}
	rec.received = true
	rec.emit(auditinternal.StageRequestReceived)
}

// emit hands a copy of the event at stage to the backends, unless the level is None or the stage omitted.
func (rec *record) emit(stage auditinternal.Stage) {
	if rec.level == auditinternal.LevelNone || rec.level == "" || slices.Contains(rec.omit, stage) {
		return
	}
	ev := rec.ev.DeepCopy()
	ev.Stage = stage
	ev.StageTimestamp = metav1.NewMicroTime(time.Now())
	if !ev.Level.GreaterOrEqual(auditinternal.LevelRequest) {
		ev.RequestObject = nil
	}
	if !ev.Level.GreaterOrEqual(auditinternal.LevelRequestResponse) {
		ev.ResponseObject = nil
	}
	rec.a.backend.ProcessEvents(ev)
}

// Finish completes the request's record: code is the HTTP status the request ended with (for gRPC calls, the code
// its error maps to), err the error returned if any, and response the object sent back (nil when none or unknown).
// It emits ResponseComplete, or Panic when panicked.
func Finish(ctx context.Context, code int, err error, response proto.Message, panicked bool) {
	rec := recordOf(ctx)
	if rec == nil {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.finished {
		return
	}
	rec.finished = true
	rec.receivedLocked()
	st := &metav1.Status{Code: int32(code)} //nolint:gosec // G115: an HTTP status code
	if code >= http.StatusBadRequest {
		st.Status = metav1.StatusFailure
		var se apierrors.APIStatus
		if errors.As(err, &se) {
			st.Reason, st.Message = se.Status().Reason, se.Status().Message
		}
	}
	rec.ev.ResponseStatus = st
	if response != nil && rec.level.GreaterOrEqual(auditinternal.LevelRequestResponse) {
		rec.ev.ResponseObject = rec.a.unknown(response)
	}
	if panicked {
		rec.emit(auditinternal.StagePanic)
		return
	}
	rec.emit(auditinternal.StageResponseComplete)
}

// unknown renders m as the object's JSON, as kube logs request and response objects.
func (a *Auditor) unknown(m proto.Message) *runtime.Unknown {
	if a.objectJSON == nil {
		return nil
	}
	b, ok := a.objectJSON(m)
	if !ok {
		return nil
	}
	return &runtime.Unknown{Raw: b, ContentType: runtime.ContentTypeJSON}
}
