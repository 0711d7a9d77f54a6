package hub

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/trellis-dev/trellis/dashboard"
	"github.com/trellis-dev/trellis/hub/auth"
)

// mountDashboard mounts the web dashboard (package dashboard) at /dashboard/ on mux; it calls mux itself for the
// REST API with the logged-in user's token. Only users and robot accounts log in: seed certificates and bootstrap
// tokens are refused.
func mountDashboard(mux *http.ServeMux, authn *auth.Authenticator, log *slog.Logger) error {
	dash, err := dashboard.New(dashboard.Config{API: mux, Logger: log, Authenticate: func(r *http.Request) (dashboard.User, error) {
		u, err := authn.Authenticate(r.Context(), auth.RequestFromHTTP(r))
		switch {
		case err != nil:
			return dashboard.User{}, err
		case u.IsBootstrap() || u.Seed != "":
			return dashboard.User{}, errors.New("bootstrap tokens and seed agents cannot log in to the dashboard")
		}
		return dashboard.User{Name: u.Name, Groups: u.Groups, ClusterAdmin: u.InGroup(auth.GroupAdmins)}, nil
	}})
	if err != nil {
		return err
	}
	mux.Handle(dashboard.Path, dash)
	return nil
}
