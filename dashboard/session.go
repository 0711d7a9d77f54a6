package dashboard

import (
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// cookieName holds the user's token, base64url-encoded (cookie values may not hold every byte a token might). The
// __Secure- prefix makes browsers refuse it unless it is Secure and was set over HTTPS.
const cookieName = "__Secure-trellis-token"

// csrfHeader must be on every API call and session change: a cross-site form or image cannot send it, and a
// cross-origin script that tries needs a CORS preflight the hub never grants. SameSite=Strict is the first wall.
const csrfHeader = "X-Trellis-Dashboard"

// maxLoginBody bounds the login request; a token is a few dozen bytes.
const maxLoginBody = 8 << 10

// apiPrefixes are the hub paths the page may reach through /dashboard/api: the REST API and its OpenAPI
// documents, not /metrics or /debug/pprof.
var apiPrefixes = []string{"/api/", "/apis/", "/openapi/"}

// session serves the login (POST {"token": ...}), the current user (GET) and the logout (DELETE).
func (h *handler) session(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		token, ok := tokenOf(r)
		if !ok {
			writeStatus(w, http.StatusUnauthorized, "Unauthorized", "not logged in")
			return
		}
		u, err := h.authenticate(r, token)
		if err != nil {
			clearCookie(w)
			writeStatus(w, http.StatusUnauthorized, "Unauthorized", err.Error())
			return
		}
		writeJSON(w, u)
	case http.MethodPost:
		if !sameOrigin(r) {
			writeStatus(w, http.StatusForbidden, "Forbidden", "the login must come from the dashboard's own page")
			return
		}
		var body struct {
			Token string `json:"token"`
		}
		dec := json.NewDecoder(io.LimitReader(r.Body, maxLoginBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			writeStatus(w, http.StatusBadRequest, "BadRequest", "body: want {\"token\": \"...\"}: "+err.Error())
			return
		}
		body.Token = strings.TrimSpace(body.Token)
		if body.Token == "" {
			writeStatus(w, http.StatusBadRequest, "BadRequest", "token: required")
			return
		}
		u, err := h.authenticate(r, body.Token)
		if err != nil {
			h.cfg.Logger.Info("dashboard login refused", "remote", r.RemoteAddr, "err", err)
			writeStatus(w, http.StatusUnauthorized, "Unauthorized", err.Error())
			return
		}
		h.cfg.Logger.Info("dashboard login", "user", u.Name, "remote", r.RemoteAddr)
		http.SetCookie(w, &http.Cookie{
			Name: cookieName, Value: base64.RawURLEncoding.EncodeToString([]byte(body.Token)),
			Path: Path, Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		})
		writeJSON(w, u)
	case http.MethodDelete:
		if !sameOrigin(r) {
			writeStatus(w, http.StatusForbidden, "Forbidden", "the logout must come from the dashboard's own page")
			return
		}
		clearCookie(w)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" is not served on the session")
	}
}

// authenticate asks the hub who token belongs to.
func (h *handler) authenticate(r *http.Request, token string) (User, error) {
	probe := r.Clone(r.Context())
	probe.Header = http.Header{"Authorization": {"Bearer " + token}}
	probe.TLS = nil // a client certificate of the browser's must not stand in for the token
	u, err := h.cfg.Authenticate(probe)
	if err != nil {
		return User{}, err
	}
	return u, nil
}

// api hands a request of the page to the hub's REST handler with the cookie's token as its bearer token.
func (h *handler) api(w http.ResponseWriter, r *http.Request, path string) {
	w.Header().Set("Cache-Control", "no-store")
	if !sameOrigin(r) {
		h.cfg.Logger.Debug("dashboard API call refused: not from the dashboard's page", "path", path, "remote", r.RemoteAddr, "secFetchSite", r.Header.Get("Sec-Fetch-Site"))
		writeStatus(w, http.StatusForbidden, "Forbidden", "API calls must come from the dashboard's own page (header "+csrfHeader+")")
		return
	}
	if !allowedAPIPath(path) {
		writeStatus(w, http.StatusNotFound, "NotFound", "the dashboard does not serve "+path)
		return
	}
	token, ok := tokenOf(r)
	if !ok {
		writeStatus(w, http.StatusUnauthorized, "Unauthorized", "not logged in")
		return
	}
	fwd := r.Clone(r.Context())
	u := *r.URL
	u.Path = path
	if u.RawPath != "" {
		u.RawPath = strings.TrimPrefix(u.RawPath, strings.TrimSuffix(Path, "/")+"/api")
	}
	fwd.URL, fwd.RequestURI = &u, u.RequestURI()
	fwd.Header.Del("Cookie")
	fwd.Header.Del(csrfHeader)
	fwd.Header.Set("Authorization", "Bearer "+token)
	fwd.TLS = nil
	// Lists go out gzipped (1,000 shoots are about 1 MB of JSON, some 60 KB compressed); watches stream as they are.
	if r.Method == http.MethodGet && !isWatch(r) && acceptsGzip(r) {
		gw := &gzipWriter{ResponseWriter: w}
		defer gw.close()
		w = gw
	}
	fwd.Header.Del("Accept-Encoding")
	h.cfg.API.ServeHTTP(w, fwd)
}

func isWatch(r *http.Request) bool {
	v := r.URL.Query().Get("watch")
	return v == "true" || v == "1"
}

// gzipWriter compresses a response unless the handler encoded it itself.
type gzipWriter struct {
	http.ResponseWriter
	gz      *gzip.Writer
	decided bool
}

func (g *gzipWriter) WriteHeader(code int) {
	if !g.decided {
		g.decided = true
		h := g.Header()
		if h.Get("Content-Encoding") == "" && code != http.StatusNoContent && code != http.StatusNotModified {
			h.Set("Content-Encoding", "gzip")
			h.Del("Content-Length")
			h.Add("Vary", "Accept-Encoding")
			g.gz, _ = gzip.NewWriterLevel(g.ResponseWriter, gzip.BestSpeed)
		}
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *gzipWriter) Write(b []byte) (int, error) {
	if !g.decided {
		g.WriteHeader(http.StatusOK)
	}
	if g.gz != nil {
		return g.gz.Write(b)
	}
	return g.ResponseWriter.Write(b)
}

// Flush sends what is compressed so far (http.Flusher, for handlers that flush).
func (g *gzipWriter) Flush() {
	if g.gz != nil {
		_ = g.gz.Flush()
	}
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (g *gzipWriter) close() {
	if g.gz != nil {
		_ = g.gz.Close()
	}
}

func allowedAPIPath(p string) bool {
	if p == "/api" || p == "/apis" {
		return true
	}
	if strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
		return false
	}
	for _, pre := range apiPrefixes {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

// sameOrigin reports whether r comes from the dashboard's own scripts: it carries csrfHeader, and the browser does
// not say it is cross-site.
func sameOrigin(r *http.Request) bool {
	if r.Header.Get(csrfHeader) == "" {
		return false
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin":
		return true
	}
	return false
}

func tokenOf(r *http.Request) (string, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(b) == 0 {
		return "", false
	}
	return string(b), true
}

func clearCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Path, MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}
