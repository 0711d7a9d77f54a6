package admission_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub/auth"
	"github.com/trellis-dev/trellis/test/hubtest"
)

const bastionsPath = "/apis/operations.gardener.cloud/v1alpha1/namespaces/garden-dev/bastions"

// restBastion is what the REST test reads back of a Bastion.
type restBastion struct {
	Metadata struct {
		Annotations     map[string]string
		OwnerReferences []struct {
			APIVersion, Kind, Name, UID string
			Controller                  bool
		}
	}
	Spec struct {
		SeedName, ProviderType string
	}
	Status struct {
		LastHeartbeatTimestamp, ExpirationTimestamp time.Time
	}
}

func mustREST(t *testing.T, h *hubtest.Hub, want int, method, path, body string) []byte {
	t.Helper()
	var hdr []string
	if method == "PATCH" {
		hdr = []string{"Content-Type", "application/merge-patch+json"}
	}
	code, out := h.Do(t, method, path, body, hdr...)
	if code != want {
		t.Fatalf("%s %s: want %d, got %d: %s", method, path, want, code, out)
	}
	return out
}

func bastionBody(name, shoot, extra string) string {
	return fmt.Sprintf(`{"apiVersion":"operations.gardener.cloud/v1alpha1","kind":"Bastion","metadata":{"name":%q,"namespace":"garden-dev"%s},
		"spec":{"shootRef":{"name":%q},"seedName":"forged","providerType":"forged","sshPublicKey":%q,"ingress":[{"ipBlock":{"cidr":"192.0.2.0/24"}}]},
		"status":{"expirationTimestamp":"2099-01-01T00:00:00Z"}}`, name, extra, shoot, sshKey)
}

// TestBastionAdmissionREST creates Bastions over REST against a real hub: the admitted Bastion carries its shoot's
// seed and provider, its creator and its shoot as owner, and an hour's lease of life; Bastions for shoots that are
// not scheduled or do not allow SSH are refused with 422 naming spec.shootRef.name, and the creator is immutable.
func TestBastionAdmissionREST(t *testing.T) {
	h := hubtest.Start(t)
	h.RegisterExtensions(t, "provider-local", append(hubtest.LocalExtensions(), "Network/calico", "OperatingSystemConfig/gardenlinux")...)
	mustREST(t, h, 201, "POST", "/apis/core.gardener.cloud/v1beta1/seeds", `{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Seed","metadata":{"name":"local"},
		"spec":{"provider":{"type":"local","region":"local"},"networks":{"pods":"10.1.0.0/16","services":"10.2.0.0/16"},"dns":{}}}`)
	mustREST(t, h, 201, "POST", "/api/v1/namespaces", `{"metadata":{"name":"garden-dev"}}`)
	mustREST(t, h, 201, "POST", "/apis/core.gardener.cloud/v1beta1/projects", `{"metadata":{"name":"dev"},"spec":{"namespace":"garden-dev"}}`)
	mustREST(t, h, 201, "POST", "/apis/core.gardener.cloud/v1beta1/cloudprofiles", `{"metadata":{"name":"local"},"spec":{"type":"local",
		"kubernetes":{"versions":[{"version":"1.35.4"}]},
		"machineImages":[{"name":"gardenlinux","versions":[{"version":"1.0.0"}]}],
		"machineTypes":[{"name":"m5.large","cpu":"2","gpu":"0","memory":"8Gi"}],
		"regions":[{"name":"local"}]}}`)
	mustREST(t, h, 201, "POST", "/apis/security.gardener.cloud/v1alpha1/namespaces/garden-dev/credentialsbindings",
		`{"metadata":{"name":"local"},"provider":{"type":"local"},"credentialsRef":{"apiVersion":"v1","kind":"Secret","name":"local","namespace":"garden-dev"}}`)
	shoot := func(name, seed, workersSettings string) []byte {
		return mustREST(t, h, 201, "POST", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/shoots", fmt.Sprintf(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot",
			"metadata":{"name":%q,"namespace":"garden-dev"},
			"spec":{"cloudProfile":{"name":"local"},"credentialsBindingName":"local","region":"local","kubernetes":{"version":"1.35.4"},"seedName":%q,
			"provider":{"type":"local","workers":[{"name":"w1","minimum":1,"maximum":2,"machine":{"type":"m5.large"}}]%s},
			"networking":{"type":"calico","nodes":"10.0.0.0/16"}}}`, name, seed, workersSettings))
	}
	var s struct{ Metadata struct{ UID string } }
	if err := json.Unmarshal(shoot("s", "local", ""), &s); err != nil || s.Metadata.UID == "" {
		t.Fatalf("shoot uid: %v", err)
	}
	shoot("unscheduled", "", "")
	shoot("no-ssh", "local", `,"workersSettings":{"sshAccess":{"enabled":false}}`)

	before := time.Now().Truncate(time.Second)
	out := mustREST(t, h, 201, "POST", bastionsPath, bastionBody("b", "s", `,"annotations":{"gardener.cloud/created-by":"mallory"}`))
	var b restBastion
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	if b.Spec.SeedName != "local" || b.Spec.ProviderType != "local" {
		t.Errorf("spec.seedName %q, spec.providerType %q: want the shoot's, local and local", b.Spec.SeedName, b.Spec.ProviderType)
	}
	if got := b.Metadata.Annotations["gardener.cloud/created-by"]; got != auth.AdminUser {
		t.Errorf("created-by %q, want the requesting user %q", got, auth.AdminUser)
	}
	if o := b.Metadata.OwnerReferences; len(o) != 1 || o[0].Kind != "Shoot" || o[0].Name != "s" || o[0].UID != s.Metadata.UID || !o[0].Controller {
		t.Errorf("owner references %+v, want the shoot s (%s) as controller", o, s.Metadata.UID)
	}
	if hb, exp := b.Status.LastHeartbeatTimestamp, b.Status.ExpirationTimestamp; hb.Before(before) || hb.After(time.Now()) || exp.Sub(hb) != time.Hour {
		t.Errorf("status.lastHeartbeatTimestamp %v, expirationTimestamp %v: want now and an hour later", hb, exp)
	}

	for _, tc := range []struct{ shoot, message string }{
		{"unscheduled", "shoot is not yet assigned to a seed"},
		{"no-ssh", "ssh access is disabled for worker nodes"},
		{"missing", "shoot garden-dev/missing not found"},
	} {
		code, body := h.Do(t, "POST", bastionsPath, bastionBody("b-"+tc.shoot, tc.shoot, ""))
		if code != 422 || !strings.Contains(string(body), `"field":"spec.shootRef.name"`) || !strings.Contains(string(body), tc.message) {
			t.Errorf("Bastion for shoot %s: want 422 naming spec.shootRef.name (%s), got %d %s", tc.shoot, tc.message, code, body)
		}
	}

	// The creator is immutable; the seed stays the shoot's whatever an update says.
	code, body := h.Do(t, "PATCH", bastionsPath+"/b", `{"metadata":{"annotations":{"gardener.cloud/created-by":"mallory"}}}`, "Content-Type", "application/merge-patch+json")
	if code != 422 || !strings.Contains(string(body), "metadata.annotations[gardener.cloud/created-by]") {
		t.Errorf("changing created-by: want 422 naming the annotation, got %d %s", code, body)
	}
	out = mustREST(t, h, 200, "PATCH", bastionsPath+"/b", `{"spec":{"seedName":"elsewhere"}}`)
	if err := json.Unmarshal(out, &b); err != nil || b.Spec.SeedName != "local" {
		t.Errorf("after patching spec.seedName: %q (%v), want the shoot's seed local", b.Spec.SeedName, err)
	}
}
