package hub_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// The admin token rotates with the CA: after start both the old and the new token (data-dir/admin-token.next) are
// admins; after complete the new one, now in data-dir/admin-token, is the only one.
func TestAdminTokenRotation(t *testing.T) {
	h := hubtest.Start(t)
	oldToken := h.Token
	whoCanList := func(token string) int {
		t.Helper()
		code, _ := h.DoToken(t, token, http.MethodGet, "/api/v1/namespaces", nil)
		return code
	}
	if code, body := h.Do(t, http.MethodPost, hub.CARotationPath+"/start", nil); code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	next, err := os.ReadFile(filepath.Join(h.DataDir, "admin-token.next"))
	if err != nil {
		t.Fatal(err)
	}
	newToken := strings.TrimSpace(string(next))
	if newToken == "" || newToken == oldToken {
		t.Fatalf("new admin token %q", newToken)
	}
	if whoCanList(oldToken) != http.StatusOK || whoCanList(newToken) != http.StatusOK {
		t.Fatalf("in Preparing both admin tokens must be valid: old %d, new %d", whoCanList(oldToken), whoCanList(newToken))
	}
	if code, body := h.DoToken(t, newToken, http.MethodPost, hub.CARotationPath+"/prepared", nil); code != http.StatusOK {
		t.Fatalf("prepared: %d %s", code, body)
	}
	if code, body := h.DoToken(t, newToken, http.MethodPost, hub.CARotationPath+"/complete", nil); code != http.StatusOK {
		t.Fatalf("complete: %d %s", code, body)
	}
	if code := whoCanList(oldToken); code != http.StatusUnauthorized {
		t.Errorf("the old admin token after complete: %d, want 401", code)
	}
	if code := whoCanList(newToken); code != http.StatusOK {
		t.Errorf("the new admin token after complete: %d, want 200", code)
	}
	file, err := os.ReadFile(filepath.Join(h.DataDir, "admin-token"))
	if err != nil || strings.TrimSpace(string(file)) != newToken {
		t.Errorf("data-dir/admin-token after complete: %q, %v; want the new token", file, err)
	}
	if _, err := os.Stat(filepath.Join(h.DataDir, "admin-token.next")); !os.IsNotExist(err) {
		t.Errorf("admin-token.next after complete: %v, want it gone", err)
	}
}
