package auth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// clock is a settable clock for the hub's token expiry.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const tokensPath = "/apis/auth.trellis.dev/v1alpha1/namespaces/"

type tokenResponse struct {
	Metadata struct{ Name, Namespace string }
	Spec     struct {
		User                string
		ExpirationTimestamp time.Time
		Revoked             bool
	}
	Status struct {
		TokenID, TokenHash, Token string
	}
}

// create posts an AccessToken with bearer token as and returns the response.
func create(t *testing.T, h *hubtest.Hub, as, ns, body string) (int, tokenResponse, string) {
	t.Helper()
	code, out := h.DoToken(t, as, "POST", tokensPath+ns+"/accesstokens", body)
	var r tokenResponse
	_ = json.Unmarshal(out, &r)
	return code, r, string(out)
}

// whoAmI lists namespaces with token: 200 when it authenticates, else the 401's message.
func whoAmI(t *testing.T, h *hubtest.Hub, token string) (int, string) {
	t.Helper()
	code, out := h.DoToken(t, token, "GET", "/api/v1/namespaces", nil)
	var st struct{ Message string }
	_ = json.Unmarshal(out, &st)
	if code != 200 && strings.Contains(string(out), `"items"`) {
		t.Errorf("a failed request carried data: %s", out)
	}
	return code, st.Message
}

// TestAccessTokens covers the life of user and robot tokens against a real hub: the token is returned once and
// stored nowhere (not in etcd, not in reads), authenticates as its user or service account, and stops with a
// distinct 401 when it is wrong, expired, revoked, deleted, or its ServiceAccount is gone.
func TestAccessTokens(t *testing.T) {
	clk := &clock{now: time.Now().Truncate(time.Second)}
	h := hubtest.Start(t, func(c *hub.Config) {
		c.Now, c.Controllers, c.DisableScheduler = clk.Now, []string{"project"}, true
		c.MaxTokenLifetime = 365 * 24 * time.Hour
	})

	// A cluster admin issues a user token; it defaults to 90 days.
	code, alice, out := create(t, h, h.Token, "trellis-system", `{"metadata":{"name":"alice-laptop"},"spec":{"user":"alice","groups":["dev-team"],"description":"laptop"}}`)
	if code != 201 || !strings.HasPrefix(alice.Status.Token, auth.AccessTokenPrefix) || alice.Status.TokenID != alice.Status.Token[:auth.AccessTokenIDLength] ||
		alice.Status.TokenHash != auth.AccessTokenHash(alice.Status.Token) || !alice.Spec.ExpirationTimestamp.Equal(clk.Now().Add(90*24*time.Hour)) {
		t.Fatalf("create user token: %d %s", code, out)
	}
	if code, _, out := create(t, h, h.Token, "trellis-system", `{"metadata":{"name":"too-long"},"spec":{"user":"alice","expirationSeconds":40000000}}`); code != 422 || !strings.Contains(out, "at most") {
		t.Errorf("token beyond the maximum lifetime: want 422, got %d %s", code, out)
	}
	if code, _, out := create(t, h, h.Token, "trellis-system", `{"metadata":{"name":"past"},"spec":{"user":"alice","expirationTimestamp":"2001-01-01T00:00:00Z"}}`); code != 422 {
		t.Errorf("token expiring in the past: want 422, got %d %s", code, out)
	}

	// The token authenticates; reads of the AccessToken never show it again.
	if code, msg := whoAmI(t, h, alice.Status.Token); code != 200 {
		t.Fatalf("alice's token: %d %s", code, msg)
	}
	for _, as := range []string{h.Token, alice.Status.Token} {
		_, got := h.DoToken(t, as, "GET", tokensPath+"trellis-system/accesstokens/alice-laptop", nil)
		_, list := h.DoToken(t, as, "GET", tokensPath+"trellis-system/accesstokens", nil)
		if !strings.Contains(string(got), alice.Status.TokenHash) || strings.Contains(string(got)+string(list), alice.Status.Token) {
			t.Errorf("reading the token back: want the hash and never the token, got %s / %s", got, list)
		}
	}
	// Nor is it in etcd, in any value.
	cli := h.Store().Client()
	resp, err := cli.Get(context.Background(), h.Store().Prefix(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	hashSeen := false
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Value), alice.Status.Token) || strings.Contains(string(kv.Value), alice.Status.Token[auth.AccessTokenIDLength:]) {
			t.Errorf("etcd key %s holds the token", kv.Key)
		}
		hashSeen = hashSeen || strings.Contains(string(kv.Value), alice.Status.TokenHash)
	}
	if !hashSeen {
		t.Errorf("no etcd value holds the token's hash: the scan missed the AccessToken")
	}

	// Users cannot issue user tokens; they see their own tokens only and may revoke them.
	if code, _, out := create(t, h, alice.Status.Token, "trellis-system", `{"metadata":{"name":"mine"},"spec":{"user":"alice"}}`); code != 403 {
		t.Errorf("user creates a user token: want 403, got %d %s", code, out)
	}
	code, bob, out := create(t, h, h.Token, "trellis-system", `{"metadata":{"name":"bob"},"spec":{"user":"bob","expirationSeconds":3600}}`)
	if code != 201 || !bob.Spec.ExpirationTimestamp.Equal(clk.Now().Add(time.Hour)) {
		t.Fatalf("bob's token: %d %s", code, out)
	}
	if code, out := h.DoToken(t, alice.Status.Token, "GET", tokensPath+"trellis-system/accesstokens/bob", nil); code != 404 {
		t.Errorf("alice reads bob's token: want 404, got %d %s", code, out)
	}
	if _, out := h.DoToken(t, alice.Status.Token, "GET", tokensPath+"trellis-system/accesstokens", nil); strings.Contains(string(out), `"bob"`) || !strings.Contains(string(out), "alice-laptop") {
		t.Errorf("alice lists tokens: want hers only, got %s", out)
	}
	if code, out := h.DoToken(t, alice.Status.Token, "PATCH", tokensPath+"trellis-system/accesstokens/alice-laptop", `{"spec":{"user":"root"}}`,
		"Content-Type", "application/merge-patch+json"); code != 403 && code != 422 {
		t.Errorf("alice changes her token's user: want 403 or 422, got %d %s", code, out)
	}

	// Expiry, on the hub's clock.
	clk.Add(time.Hour)
	if code, msg := whoAmI(t, h, bob.Status.Token); code != 401 || msg != fmt.Sprintf("token trellis-system/bob expired at %s", bob.Spec.ExpirationTimestamp.UTC().Format(time.RFC3339)) {
		t.Errorf("expired token: want 401 naming the expiry, got %d %q", code, msg)
	}

	// Revocation keeps the record and says so; it cannot be undone.
	if code, out := h.DoToken(t, alice.Status.Token, "PATCH", tokensPath+"trellis-system/accesstokens/alice-laptop", `{"spec":{"revoked":true}}`,
		"Content-Type", "application/merge-patch+json"); code != 200 {
		t.Fatalf("alice revokes her token: %d %s", code, out)
	}
	if code, msg := whoAmI(t, h, alice.Status.Token); code != 401 || msg != "token trellis-system/alice-laptop was revoked" {
		t.Errorf("revoked token: want 401 saying so, got %d %q", code, msg)
	}
	if code, out := h.Do(t, "PATCH", tokensPath+"trellis-system/accesstokens/alice-laptop", `{"spec":{"revoked":false}}`,
		"Content-Type", "application/merge-patch+json"); code != 422 {
		t.Errorf("reinstating a revoked token: want 422, got %d %s", code, out)
	}

	// Wrong, malformed and missing tokens.
	wrong := auth.NewAccessToken()
	for _, tc := range []struct{ token, want string }{
		{wrong, "invalid bearer token"},
		{"trl_short", "invalid bearer token"},
		{"", "a valid bearer token or seed client certificate is required"},
	} {
		if code, msg := whoAmI(t, h, tc.token); code != 401 || msg != tc.want {
			t.Errorf("token %q: want 401 %q, got %d %q", tc.token, tc.want, code, msg)
		}
	}

	// A robot token: project dev's owner (its creator) makes a ServiceAccount and a token for it.
	owner := h.UserToken(t, "olivia")
	if code, out := h.DoToken(t, owner, "POST", "/apis/core.gardener.cloud/v1beta1/projects", `{"metadata":{"name":"dev"},"spec":{"namespace":"garden-dev"}}`); code != 201 {
		t.Fatalf("olivia creates project dev: %d %s", code, out)
	}
	h.WaitNamespace(t, "garden-dev")
	if code, _, out := create(t, h, owner, "garden-dev", `{"metadata":{"name":"ci"},"spec":{"serviceAccountName":"ci"}}`); code != 422 || !strings.Contains(out, "spec.serviceAccountName") {
		t.Errorf("robot token of a missing ServiceAccount: want 422, got %d %s", code, out)
	}
	if code, out := h.DoToken(t, owner, "POST", "/api/v1/namespaces/garden-dev/serviceaccounts", `{"metadata":{"name":"ci"}}`); code != 201 {
		t.Fatalf("olivia creates ServiceAccount ci: %d %s", code, out)
	}
	code, robot, out := create(t, h, owner, "garden-dev", `{"metadata":{"name":"ci"},"spec":{"serviceAccountName":"ci"}}`)
	if code != 201 || robot.Status.Token == "" {
		t.Fatalf("olivia creates a robot token: %d %s", code, out)
	}
	// Authenticated, it is a ServiceAccount of no project role yet: it may not read the project's shoots.
	if code, msg := whoAmI(t, h, robot.Status.Token); code != 200 {
		t.Fatalf("robot token: %d %s", code, msg)
	}
	if code, out := h.DoToken(t, robot.Status.Token, "GET", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots", nil); code != 403 ||
		!strings.Contains(string(out), `User \"system:serviceaccount:garden-dev:ci\" cannot list resource \"shoots\"`) {
		t.Errorf("robot without a role lists shoots: want 403 naming it, got %d %s", code, out)
	}
	// Deleting the ServiceAccount stops the token, and a new ServiceAccount of the same name does not inherit it.
	if code, out := h.Do(t, "DELETE", "/api/v1/namespaces/garden-dev/serviceaccounts/ci", nil); code != 200 {
		t.Fatalf("delete ServiceAccount: %d %s", code, out)
	}
	if code, msg := whoAmI(t, h, robot.Status.Token); code != 401 || msg != "token garden-dev/ci: its ServiceAccount garden-dev/ci was deleted" {
		t.Errorf("token of a deleted ServiceAccount: want 401 saying so, got %d %q", code, msg)
	}
	h.Do(t, "POST", "/api/v1/namespaces/garden-dev/serviceaccounts", `{"metadata":{"name":"ci"}}`)
	if code, msg := whoAmI(t, h, robot.Status.Token); code != 401 || !strings.Contains(msg, "was deleted") {
		t.Errorf("token of a recreated ServiceAccount: want 401, got %d %q", code, msg)
	}

	// Deleting an AccessToken removes it: the hub no longer knows the token.
	if code, out := h.Do(t, "DELETE", tokensPath+"trellis-system/accesstokens/alice-laptop", nil); code != 200 {
		t.Fatalf("delete token: %d %s", code, out)
	}
	if code, msg := whoAmI(t, h, alice.Status.Token); code != 401 || msg != "invalid bearer token" {
		t.Errorf("deleted token: want 401 invalid bearer token, got %d %q", code, msg)
	}
}
