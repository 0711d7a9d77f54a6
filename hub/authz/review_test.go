package authz_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// TestSeedAccessReviews: a seed agent's access reviews answer as its real requests are decided (by the seed
// authorizer), its whoami names its seed, and its rules review says it is incomplete.
func TestSeedAccessReviews(t *testing.T) {
	h := hubtest.Start(t, func(c *hub.Config) { c.Controllers, c.DisableScheduler = []string{"-project"}, true })
	cert := clientCert(t, h, []string{"gardener.cloud:system:seeds"}, "gardener.cloud:system:seed:s1")
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig(h, &cert)}, Timeout: 30 * time.Second}
	do := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, h.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	for _, tc := range []struct{ verb, group, resource, ns, method, path string }{
		{"list", "core.gardener.cloud", "shoots", "", "GET", "/apis/core.gardener.cloud/v1beta1/shoots"},
		{"create", "core.gardener.cloud", "shoots", "garden-dev", "POST", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots"},
		{"list", "", "secrets", "garden-dev", "GET", "/api/v1/namespaces/garden-dev/secrets"},
		{"list", "core.gardener.cloud", "cloudprofiles", "", "GET", "/apis/core.gardener.cloud/v1beta1/cloudprofiles"},
		{"list", "core.gardener.cloud", "projects", "", "GET", "/apis/core.gardener.cloud/v1beta1/projects"},
	} {
		code, out := do("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", fmt.Sprintf(
			`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":%q,"group":%q,"resource":%q,"namespace":%q}}}`,
			tc.verb, tc.group, tc.resource, tc.ns))
		var rev struct{ Status struct{ Allowed bool } }
		if code != 201 || json.Unmarshal(out, &rev) != nil {
			t.Fatalf("review of %s %s: %d %s", tc.verb, tc.resource, code, out)
		}
		answered, out := do(tc.method, tc.path, `{"metadata":{"name":"x"}}`)
		if rev.Status.Allowed != (answered != http.StatusForbidden) {
			t.Errorf("%s %s in %q: review allowed=%v, the request answered %d %s", tc.verb, tc.resource, tc.ns, rev.Status.Allowed, answered, out)
		}
	}
	code, out := do("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", `{}`)
	if code != 201 || !strings.Contains(string(out), `"username":"gardener.cloud:system:seed:s1"`) || !strings.Contains(string(out), `"trellis.dev/seed":["s1"]`) {
		t.Errorf("seed whoami: %d %s", code, out)
	}
	code, out = do("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", `{"spec":{"namespace":"garden-dev"}}`)
	if code != 201 || !strings.Contains(string(out), `"incomplete":true`) {
		t.Errorf("seed rules review: %d %s", code, out)
	}
}
