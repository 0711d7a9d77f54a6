package dashboard

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzSession feeds the login's JSON body and the session cookie, the two things the dashboard decodes itself,
// with arbitrary bytes. The hub behind it is replaced by a fake (an authenticator that knows one token and an API
// that answers 200) because only the decoding is under test; TestHandler runs the same paths on a real hub.
func FuzzSession(f *testing.F) {
	f.Add([]byte(`{"token":"good"}`), "Z29vZA")
	f.Add([]byte(`{"token":"  "}`), "")
	f.Add([]byte(`{"token":1}`), "%%%")
	f.Add([]byte(`{"token":"good","x":1}`), "Z29vZA==")
	f.Add([]byte(`[]`), "YmFk")
	h, err := New(Config{
		API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer good" || r.Header.Get("Cookie") != "" {
				w.WriteHeader(http.StatusTeapot)
			}
		}),
		Authenticate: func(r *http.Request) (User, error) {
			if r.Header.Get("Authorization") == "Bearer good" {
				return User{Name: "good"}, nil
			}
			return User{}, errors.New("invalid bearer token")
		},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, cookie string) {
		req := httptest.NewRequest("POST", "https://hub/dashboard/session", strings.NewReader(string(body)))
		req.Header.Set(csrfHeader, "1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("login: %d %s", w.Code, w.Body)
		}
		if (w.Code == 200) != (w.Header().Get("Set-Cookie") != "") {
			t.Fatalf("login answered %d with cookie %q", w.Code, w.Header().Get("Set-Cookie"))
		}
		req = httptest.NewRequest("GET", "https://hub/dashboard/api/apis", nil)
		req.Header.Set(csrfHeader, "1")
		req.AddCookie(&http.Cookie{Name: cookieName, Value: strings.Map(func(r rune) rune {
			if r < 0x21 || r > 0x7e || r == ';' || r == '"' || r == '\\' || r == ',' {
				return -1
			}
			return r
		}, cookie)})
		w = httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 && w.Code != http.StatusUnauthorized && w.Code != http.StatusTeapot {
			t.Fatalf("bridge: %d %s", w.Code, w.Body)
		}
	})
}
