package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// Path is where the hub mounts the dashboard's handler.
const Path = "/dashboard/"

// contentSecurityPolicy allows the page its own scripts, styles, images and API calls and nothing else: no inline
// script or style, no eval, no other origin, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// User is who a token belongs to, as the page needs it: the name and groups project members are matched against.
type User struct {
	Name   string   `json:"name"`
	Groups []string `json:"groups"`
	// ClusterAdmin is set for members of system:masters, who see seeds and every project.
	ClusterAdmin bool `json:"clusterAdmin"`
}

// Config configures the handler.
type Config struct {
	// API serves the hub's REST API; requests reach it with the user's token in the Authorization header and the
	// /dashboard/api prefix removed.
	API http.Handler
	// Authenticate says who the bearer token of r's Authorization header belongs to, or why it is refused.
	Authenticate func(r *http.Request) (User, error)
	// Logger receives the handler's errors; nil discards them.
	Logger *slog.Logger
}

// Validate reports a missing field.
func (c Config) Validate() error {
	switch {
	case c.API == nil:
		return errors.New("dashboard: Config.API is required")
	case c.Authenticate == nil:
		return errors.New("dashboard: Config.Authenticate is required")
	}
	return nil
}

// New returns the dashboard's handler, to be mounted at Path.
func New(cfg Config) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a, err := loadAssets()
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return &handler{cfg: cfg, assets: a}, nil
}

type handler struct {
	cfg    Config
	assets *assets
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", contentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	hdr.Set("Cross-Origin-Resource-Policy", "same-origin")
	rest, _ := strings.CutPrefix(r.URL.Path, strings.TrimSuffix(Path, "/"))
	switch {
	case rest == "/session":
		h.session(w, r)
	case strings.HasPrefix(rest, "/api/"):
		h.api(w, r, strings.TrimPrefix(rest, "/api"))
	default:
		h.assets.serve(w, r, strings.TrimPrefix(rest, "/"))
	}
}

// writeStatus answers with a Kubernetes Status body, as the hub's API does, so the page reads one error shape.
func writeStatus(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": message,
	})
}
