package hub_test

import (
	"strings"
	"testing"
)

// TestShootQuotaAdmission drives Gardener's ShootQuotaValidator through a real hub: shoots of a credentials binding
// with a Project quota of 6 CPUs are admitted while their workers' maximum × CPUs fit, a create or an update beyond
// it is 403 Forbidden naming the metric, the quota and its limit (a dry run too), and an update that does not raise
// usage passes.
func TestShootQuotaAdmission(t *testing.T) {
	h := quietHub(t)
	garden(t, h)
	mustDo(t, h, 201, "POST", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/quotas",
		`{"metadata":{"name":"trial"},"spec":{"scope":{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Project"},"metrics":{"cpu":"6","loadbalancer":"10"}}}`)
	mustDo(t, h, 201, "POST", "/apis/security.gardener.cloud/v1alpha1/namespaces/garden-dev/credentialsbindings",
		`{"metadata":{"name":"limited"},"provider":{"type":"local"},"credentialsRef":{"apiVersion":"v1","kind":"Secret","name":"local","namespace":"garden-dev"},
		"quotas":[{"name":"trial","namespace":"garden-dev"}]}`)
	limited := func(name string) string {
		// One pool of at most 2 × m5.large (2 CPUs): 4 CPUs.
		return strings.Replace(shoot(name, "garden-dev", "1.35.4"), `"credentialsBindingName":"local"`, `"credentialsBindingName":"limited"`, 1)
	}
	mustDo(t, h, 201, "POST", shoots, limited("first"))
	// A shoot of the binding without quotas does not count.
	mustDo(t, h, 201, "POST", shoots, shoot("unlimited", "garden-dev", "1.35.4"))

	forbidden := func(what string, code int, body []byte) {
		t.Helper()
		if code != 403 {
			t.Fatalf("%s: want 403, got %d %s", what, code, body)
		}
		st := decodeStatus(t, body)
		for _, w := range []string{"quota limits exceeded", "cpu (quota garden-dev/trial limits it to 6: 4 in use, the shoot needs 4)"} {
			if st.Reason != "Forbidden" || !strings.Contains(st.Message, w) {
				t.Errorf("%s: want Forbidden saying %q, got %+v", what, w, st)
			}
		}
	}
	code, body := h.Do(t, "POST", shoots, limited("second"))
	forbidden("second shoot", code, body)
	code, body = h.Do(t, "POST", shoots+"?dryRun=All", limited("second"))
	forbidden("second shoot, dry run", code, body)

	// Raising the first shoot's maximum to 3 (6 CPUs) fits, to 4 does not; a label alone is not checked.
	patch := func(maximum string) (int, []byte) {
		return h.Do(t, "PATCH", shoots+"/first", `{"spec":{"provider":{"workers":[{"name":"w1","minimum":1,"maximum":`+maximum+`,"machine":{"type":"m5.large"}}]}}}`,
			"Content-Type", "application/merge-patch+json")
	}
	if code, body := patch("3"); code != 200 {
		t.Fatalf("maximum 3: want 200, got %d %s", code, body)
	}
	code, body = patch("4")
	if code != 403 || !strings.Contains(string(body), "cpu (quota garden-dev/trial limits it to 6: 0 in use, the shoot needs 8)") {
		t.Errorf("maximum 4: want 403 naming cpu, got %d %s", code, body)
	}
	mustDo(t, h, 200, "PATCH", shoots+"/first", `{"metadata":{"labels":{"team":"a"}}}`)
}
