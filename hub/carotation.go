package hub

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/hub/pki"
)

// CARotationPath is where the hub serves its CA rotation to cluster admins: GET answers the status (pki.Status as
// JSON); POST to CARotationPath+"/start", "/prepared" and "/complete" moves the phase and answers the new status.
// A transition the phase does not allow answers 409 Conflict naming the phase.
const CARotationPath = "/hub/ca-rotation"

// caRotationHandler serves CARotationPath over authority. It reloads the state first, as another replica may have
// moved it.
// The admin token rotates in the same phases: start makes the new token (data-dir/admin-token.next), complete makes
// it the only one (data-dir/admin-token); the token steps are idempotent, so a retried start or complete is safe.
func caRotationHandler(authority *pki.Authority, authn *auth.Authenticator, now func() time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		action := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, CARotationPath), "/")
		var err error
		switch {
		case r.Method == http.MethodGet && action == "":
			err = authority.Reload(ctx)
		case r.Method == http.MethodPost && action == "start":
			if _, err = authority.Start(ctx, now()); err == nil {
				err = authn.StartAdminTokenRotation(ctx)
			}
		case r.Method == http.MethodPost && action == "prepared":
			err = authority.MarkPrepared(ctx)
		case r.Method == http.MethodPost && action == "complete":
			if err = authority.Complete(ctx, now()); err == nil {
				err = authn.CompleteAdminTokenRotation(ctx)
			}
		default:
			gateway.WriteError(w, apierrors.NewMethodNotSupported(caRotationResource, r.Method+" "+r.URL.Path))
			return
		}
		switch {
		case errors.Is(err, pki.ErrPhase):
			gateway.WriteError(w, apierrors.NewConflict(caRotationResource, "hub", err))
			return
		case err != nil:
			gateway.WriteError(w, apierrors.NewInternalError(err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(authority.Status())
	})
}

var caRotationResource = schema.GroupResource{Group: "trellis.dev", Resource: "ca-rotation"}
