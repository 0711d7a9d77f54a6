package dashboard_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/test/hubtest"
)

// TestHandler checks the dashboard's HTTP face on a real hub: the page and its headers, the login that turns a
// token into an HttpOnly cookie, and the API bridge that accepts only the page's own requests.
func TestHandler(t *testing.T) {
	h := hubtest.Start(t)
	alice := h.UserToken(t, "alice")
	noRedirect := *h.HTTP
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	send := func(method, path, body string, header ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, h.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	read := func(r *http.Response) string { b, _ := io.ReadAll(r.Body); return string(b) }

	t.Run("page", func(t *testing.T) {
		if r := send("GET", "/dashboard", ""); r.StatusCode/100 != 3 || r.Header.Get("Location") != "/dashboard/" {
			t.Errorf("GET /dashboard: %d to %q", r.StatusCode, r.Header.Get("Location"))
		}
		r := send("GET", "/dashboard/projects/dev/shoots/x", "")
		body := read(r)
		if r.StatusCode != 200 || !strings.Contains(body, `<div id="app">`) {
			t.Fatalf("a page route: %d %s", r.StatusCode, body)
		}
		for k, want := range map[string]string{
			"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff",
			"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
		} {
			if got := r.Header.Get(k); got != want {
				t.Errorf("%s: %q, want %q", k, got, want)
			}
		}
		csp := r.Header.Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, d) {
				t.Errorf("CSP %q lacks %q", csp, d)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("CSP allows unsafe sources: %q", csp)
		}
		if strings.Contains(body, "<script>") || strings.Contains(body, "<style") || strings.Contains(body, " style=") {
			t.Error("index.html has inline script or style")
		}
		asset := body[strings.Index(body, "/dashboard/assets/"):]
		asset = asset[:strings.IndexByte(asset, '"')]
		a := send("GET", asset, "", "Accept-Encoding", "gzip")
		if a.StatusCode != 200 || a.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(a.Header.Get("Cache-Control"), "immutable") {
			t.Errorf("GET %s: %d, encoding %q, cache %q", asset, a.StatusCode, a.Header.Get("Content-Encoding"), a.Header.Get("Cache-Control"))
		}
		if a := send("GET", "/dashboard/assets/missing.js", ""); a.StatusCode != 404 {
			t.Errorf("a missing asset: %d", a.StatusCode)
		}
		if a := send("POST", "/dashboard/", ""); a.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST of a page: %d", a.StatusCode)
		}
	})

	var cookie string
	t.Run("login", func(t *testing.T) {
		if r := send("POST", "/dashboard/session", `{"token":"`+alice+`"}`); r.StatusCode != 403 {
			t.Errorf("login without the dashboard's header: %d", r.StatusCode)
		}
		r := send("POST", "/dashboard/session", `{"token":"trl_wrong"}`, "X-Trellis-Dashboard", "1")
		if body := read(r); r.StatusCode != 401 || !strings.Contains(body, "invalid bearer token") || r.Header.Get("Set-Cookie") != "" {
			t.Errorf("a wrong token: %d %s, cookie %q", r.StatusCode, body, r.Header.Get("Set-Cookie"))
		}
		r = send("POST", "/dashboard/session", `{"tokn":"x"}`, "X-Trellis-Dashboard", "1")
		if body := read(r); r.StatusCode != 400 || !strings.Contains(body, `unknown field \"tokn\"`) {
			t.Errorf("a misspelt field: %d %s", r.StatusCode, body)
		}
		r = send("POST", "/dashboard/session", `{"token":"`+alice+`"}`, "X-Trellis-Dashboard", "1")
		var u struct {
			Name         string
			Groups       []string
			ClusterAdmin bool
		}
		if err := json.NewDecoder(r.Body).Decode(&u); err != nil || r.StatusCode != 200 || u.Name != "alice" || u.ClusterAdmin {
			t.Fatalf("login: %d %+v %v", r.StatusCode, u, err)
		}
		cookie = r.Header.Get("Set-Cookie")
		for _, attr := range []string{"__Secure-trellis-token=", "Path=/dashboard/", "HttpOnly", "Secure", "SameSite=Strict"} {
			if !strings.Contains(cookie, attr) {
				t.Errorf("cookie %q lacks %s", cookie, attr)
			}
		}
		if strings.Contains(cookie, alice) {
			t.Error("the cookie holds the token in the clear") // base64url: cookie values may not hold every byte
		}
		cookie = cookie[:strings.IndexByte(cookie, ';')]
		r = send("GET", "/dashboard/session", "", "Cookie", cookie, "X-Trellis-Dashboard", "1")
		if body := read(r); r.StatusCode != 200 || !strings.Contains(body, `"name":"alice"`) {
			t.Errorf("GET session: %d %s", r.StatusCode, body)
		}
		r = send("POST", "/dashboard/session", `{"token":"`+h.Token+`"}`, "X-Trellis-Dashboard", "1")
		if body := read(r); !strings.Contains(body, `"clusterAdmin":true`) {
			t.Errorf("the admin's session: %s", body)
		}
	})

	t.Run("api bridge", func(t *testing.T) {
		const projects = "/dashboard/api/apis/core.gardener.cloud/v1beta1/projects"
		if r := send("GET", projects, "", "Cookie", cookie, "X-Trellis-Dashboard", "1"); r.StatusCode != 200 || !strings.Contains(read(r), `"kind":"ProjectList"`) {
			t.Errorf("the page's list: %d", r.StatusCode)
		}
		// Lists are gzipped for browsers that take it; watches are not.
		r := send("GET", projects, "", "Cookie", cookie, "X-Trellis-Dashboard", "1", "Accept-Encoding", "gzip")
		if r.StatusCode != 200 || r.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("a list with Accept-Encoding gzip: %d, encoding %q", r.StatusCode, r.Header.Get("Content-Encoding"))
		} else if zr, err := gzip.NewReader(r.Body); err != nil {
			t.Error(err)
		} else if b, err := io.ReadAll(zr); err != nil || !strings.Contains(string(b), `"kind":"ProjectList"`) {
			t.Errorf("the gzipped list: %v %.200s", err, b)
		}
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", h.URL+projects+"?watch=true", nil)
		req.Header.Set("Cookie", cookie)
		req.Header.Set("X-Trellis-Dashboard", "1")
		req.Header.Set("Accept-Encoding", "gzip")
		if resp, err := noRedirect.Do(req); err != nil {
			t.Error(err)
		} else {
			if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" {
				t.Errorf("a watch: %d, encoding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
			}
			resp.Body.Close()
		}
		cancel()
		if r := send("GET", projects, "", "Cookie", cookie); r.StatusCode != 403 {
			t.Errorf("without the dashboard's header (a cross-site link or form): %d", r.StatusCode)
		}
		if r := send("GET", projects, "", "Cookie", cookie, "X-Trellis-Dashboard", "1", "Sec-Fetch-Site", "cross-site"); r.StatusCode != 403 {
			t.Errorf("a cross-site request: %d", r.StatusCode)
		}
		if r := send("GET", projects, "", "X-Trellis-Dashboard", "1"); r.StatusCode != 401 {
			t.Errorf("without the cookie: %d", r.StatusCode)
		}
		if r := send("GET", projects, "", "X-Trellis-Dashboard", "1", "Authorization", "Bearer "+h.Token); r.StatusCode != 401 {
			t.Errorf("a bearer token instead of the cookie: %d (the bridge serves the page's session only)", r.StatusCode)
		}
		for _, p := range []string{"/dashboard/api/metrics", "/dashboard/api/debug/pprof/", "/dashboard/api/dashboard/api/apis"} {
			if r := send("GET", p, "", "Cookie", cookie, "X-Trellis-Dashboard", "1"); r.StatusCode != 404 {
				t.Errorf("GET %s: %d, want 404", p, r.StatusCode)
			}
		}
		// The hub's mux cleans dot segments (a redirect to /metrics, where the cookie is not sent) first.
		if r := send("GET", "/dashboard/api/apis/../../metrics", "", "Cookie", cookie, "X-Trellis-Dashboard", "1"); r.StatusCode == 200 {
			t.Error("a dot-segment path reached /metrics through the bridge")
		}
		// Writes go through the hub's authorization like any other: alice is no cluster admin.
		r = send("POST", "/dashboard/api/apis/core.gardener.cloud/v1beta1/cloudprofiles", `{"metadata":{"name":"x"},"spec":{"type":"aws"}}`,
			"Cookie", cookie, "X-Trellis-Dashboard", "1", "Content-Type", "application/json")
		if r.StatusCode != 403 {
			t.Errorf("alice creates a cloud profile: %d", r.StatusCode)
		}
	})

	t.Run("logout", func(t *testing.T) {
		r := send("DELETE", "/dashboard/session", "", "Cookie", cookie, "X-Trellis-Dashboard", "1")
		if c := r.Header.Get("Set-Cookie"); r.StatusCode != 204 || !strings.Contains(c, "Max-Age=0") {
			t.Errorf("logout: %d, cookie %q", r.StatusCode, c)
		}
	})
}
