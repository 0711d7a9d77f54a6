package authz_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/hub/api"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// The roles of the authorization matrix: project dev's owner, members with one role each, a robot account (a
// ServiceAccount of garden-dev that is an admin member), a user of no project and a cluster admin.
var matrixRoles = []string{"owner", "admin", "viewer", "uam", "sam", "ext", "nonmember", "robot", "clusteradmin"}

// Verbs of the matrix. "status" is an update of the status subresource (kinds without one have no such verb).
const (
	all = "get list watch create update patch delete status"
	rw  = "get list watch create update patch delete"
	ro  = "get list watch"
)

// matrixExpect states, per resource and role, the verbs allowed; every verb not named is denied (403 with
// kube-apiserver's wording). "get:hide" is a get answered 404 NotFound (the object is invisible), "list:hide" a list
// answered 200 without the object. Lists and watches are in garden-dev for namespaced resources. The table is
// written from Gardener's RBAC (charts/gardener/controlplane/charts/application/templates/rbac-user.yaml and the
// project controller's project-specific ClusterRoles), not computed from the code under test.
var matrixExpect = map[string]map[string]string{
	"backupbuckets.core.gardener.cloud":           {"clusteradmin": all},
	"backupentries.core.gardener.cloud":           {"clusteradmin": all},
	"cloudprofiles.core.gardener.cloud":           everyone(ro, all),
	"controllerdeployments.core.gardener.cloud":   {"clusteradmin": rw},
	"controllerinstallations.core.gardener.cloud": {"clusteradmin": all},
	"controllerregistrations.core.gardener.cloud": {"clusteradmin": rw},
	"exposureclasses.core.gardener.cloud":         everyone(ro, rw),
	"internalsecrets.core.gardener.cloud":         {"clusteradmin": rw},
	"namespacedcloudprofiles.core.gardener.cloud": {"owner": rw, "admin": rw, "robot": rw, "viewer": ro, "clusteradmin": all},
	"projects.core.gardener.cloud": {
		"owner": rw, "admin": rw, "robot": rw, // Gardener's project-member ClusterRole may delete its project too
		"viewer": "get list watch create", "uam": "get list watch create update patch",
		"sam": "list:hide watch create", "ext": "list:hide watch create",
		"nonmember": "get:hide list:hide watch create", "clusteradmin": all,
	},
	"quotas.core.gardener.cloud":                    {"owner": rw, "admin": rw, "robot": rw, "viewer": ro, "clusteradmin": rw},
	"secretbindings.core.gardener.cloud":            {"owner": rw, "admin": rw, "robot": rw, "viewer": ro, "clusteradmin": rw},
	"seeds.core.gardener.cloud":                     everyone(ro, all),
	"shoots.core.gardener.cloud":                    {"owner": rw, "admin": rw, "robot": rw, "viewer": ro, "ext": ro, "clusteradmin": all},
	"shootstates.core.gardener.cloud":               {"clusteradmin": rw},
	"credentialsbindings.security.gardener.cloud":   {"owner": rw, "admin": rw, "robot": rw, "viewer": ro, "clusteradmin": rw},
	"workloadidentities.security.gardener.cloud":    {"owner": rw, "admin": rw, "robot": rw, "clusteradmin": all},
	"gardenlets.seedmanagement.gardener.cloud":      {"clusteradmin": all},
	"managedseeds.seedmanagement.gardener.cloud":    {"clusteradmin": all},
	"managedseedsets.seedmanagement.gardener.cloud": {"clusteradmin": all},
	"bastions.operations.gardener.cloud":            {"owner": rw, "admin": rw, "robot": rw, "viewer": ro, "clusteradmin": all},
	"configmaps":                                    {"owner": rw, "admin": rw, "robot": rw, "viewer": ro, "ext": "create delete", "clusteradmin": rw},
	"events":                                        {"owner": ro, "admin": ro, "robot": ro, "viewer": ro, "clusteradmin": rw},
	"namespaces": {
		"owner": ro, "admin": ro, "robot": ro, "viewer": ro,
		"uam": "list:hide watch", "sam": "list:hide watch", "ext": "list:hide watch",
		"nonmember": "get:hide list:hide watch", "clusteradmin": all,
	},
	"secrets":                    {"owner": rw, "admin": rw, "robot": rw, "ext": "get", "clusteradmin": rw},
	"serviceaccounts":            {"owner": rw, "admin": ro, "robot": ro, "viewer": ro, "sam": rw, "clusteradmin": rw},
	"leases.coordination.k8s.io": {"clusteradmin": rw},
	"certificatesigningrequests.certificates.k8s.io": {"clusteradmin": all},
	"clusterroles.rbac.authorization.k8s.io":         {"clusteradmin": rw},
	"accesstokens.auth.trellis.dev":                  {"owner": rw, "admin": rw, "robot": rw, "sam": rw, "clusteradmin": rw},
}

// everyone allows verbs to every role but the cluster admin, who may do admin.
func everyone(verbs, admin string) map[string]string {
	m := map[string]string{"clusteradmin": admin}
	for _, r := range matrixRoles[:len(matrixRoles)-1] {
		m[r] = verbs
	}
	return m
}

// extensionRole is what members with role extension:ext may do: read shoots, create and delete config maps, and get
// the Secret named "fixture" (a rule restricted to a name: no list).
const extensionRole = `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"ext-matrix",
	"labels":{"rbac.gardener.cloud/aggregate-to-extension-role":"ext"}},"rules":[
	{"apiGroups":["core.gardener.cloud"],"resources":["shoots"],"verbs":["get","list","watch"]},
	{"apiGroups":[""],"resources":["configmaps"],"verbs":["create","delete"]},
	{"apiGroups":[""],"resources":["secrets"],"resourceNames":["fixture"],"verbs":["get"]}]}`

// devMembers are project dev's members; spec.owner is olivia.
const devMembers = `[
	{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"adam","role":"admin"},
	{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"vera","role":"viewer"},
	{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"uma","role":"uam"},
	{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"sam","role":"serviceaccountmanager"},
	{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"eve","role":"extension:ext"},
	{"kind":"ServiceAccount","name":"robot","namespace":"garden-dev","role":"admin"}]`

var matrixUsers = map[string]string{"owner": "olivia", "admin": "adam", "viewer": "vera", "uam": "uma", "sam": "sam", "ext": "eve", "nonmember": "nora"}

// createToken creates an AccessToken with token and returns the token the response carries.
func createToken(t testing.TB, h *hubtest.Hub, token, ns string, body []byte) string {
	t.Helper()
	code, out := h.DoToken(t, token, "POST", "/apis/auth.trellis.dev/v1alpha1/namespaces/"+ns+"/accesstokens", body)
	var resp struct {
		Status struct{ Token string }
	}
	if err := json.Unmarshal(out, &resp); code != 201 || err != nil || resp.Status.Token == "" {
		t.Fatalf("create token in %s: %d %s", ns, code, out)
	}
	return resp.Status.Token
}

// setUpProject creates project dev (owner olivia, devMembers), the extension role, ServiceAccount garden-dev/robot
// and tokens for every matrix role.
func setUpProject(t *testing.T, h *hubtest.Hub) map[string]string {
	t.Helper()
	mustAdmin(t, h, 201, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", extensionRole)
	mustAdmin(t, h, 201, "POST", "/apis/core.gardener.cloud/v1beta1/projects", `{"metadata":{"name":"dev"},"spec":{"namespace":"garden-dev",
		"owner":{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"olivia"},"members":`+devMembers+`}}`)
	h.WaitNamespace(t, "garden-dev")
	mustAdmin(t, h, 201, "POST", "/api/v1/namespaces/garden-dev/serviceaccounts", `{"metadata":{"name":"robot"}}`)
	tokens := map[string]string{"clusteradmin": h.Token}
	for role, user := range matrixUsers {
		tokens[role] = h.UserToken(t, user)
	}
	tokens["robot"] = createToken(t, h, h.Token, "garden-dev", []byte(`{"metadata":{"name":"robot"},"spec":{"serviceAccountName":"robot"}}`))
	return tokens
}

// kindPath is the REST path of kind k's collection in garden-dev (namespaced) or of its cluster-scoped collection.
func kindPath(k api.Kind) string {
	p := "/apis/" + k.Group + "/" + k.Version
	if k.Group == "" {
		p = "/api/" + k.Version
	}
	if k.Namespaced {
		p += "/namespaces/garden-dev"
	}
	return p + "/" + k.Resource
}

// fixtureName is the object every verb but delete and create applies to: project dev and namespace garden-dev,
// "fixture" for the other resources.
func fixtureName(gr schema.GroupResource) string {
	switch gr.String() {
	case "projects.core.gardener.cloud":
		return "dev"
	case "namespaces":
		return "garden-dev"
	}
	return "fixture"
}

// putFixtures stores, straight into the store (no admission), the fixture of every resource and one object per kind
// version and role to delete ("del-<version>-<role>"; the projects among them with dev's members and owner, so that
// roles decide as in dev).
func putFixtures(t *testing.T, h *hubtest.Hub) {
	t.Helper()
	ctx := context.Background()
	stored := map[schema.GroupResource]api.Kind{}
	for _, k := range api.Kinds {
		if k.StoredAs == "" {
			stored[k.GroupResource()] = k
		}
	}
	dev, err := h.Registry().Get(ctx, schema.GroupResource{Group: "core.gardener.cloud", Resource: "projects"}, "", "dev")
	if err != nil {
		t.Fatal(err)
	}
	done := map[schema.GroupResource]bool{}
	for _, k := range api.Kinds {
		gr := k.GroupResource()
		c, ok := h.Registry().Collection(gr)
		if !ok {
			t.Fatalf("no collection %s", gr)
		}
		ns := ""
		if k.Namespaced {
			ns = "garden-dev"
		}
		var names []string
		if name := fixtureName(gr); name == "fixture" && !done[gr] {
			names = append(names, name)
		}
		done[gr] = true
		for _, r := range matrixRoles {
			names = append(names, deleteName(k, r))
		}
		for _, name := range names {
			obj := newObject(t, stored[gr], ns, name)
			obj.GetMetadata().ResourceVersion = ""
			if p, ok := obj.(*corev1beta1.Project); ok {
				p.Spec = proto.Clone(dev.(*corev1beta1.Project).GetSpec()).(*corev1beta1.ProjectSpec)
				p.Spec.Namespace = proto.String("garden-" + name)
			}
			if _, err := c.Create(ctx, obj); err != nil {
				t.Fatalf("fixture %s %s: %v", gr, name, err)
			}
		}
	}
}

// deleteName is the object a role deletes: one per kind version, so that both versions of a resource are checked.
func deleteName(k api.Kind, role string) string {
	if k.Kind == "Project" {
		return fmt.Sprintf("d%s%d", k.Version, slices.Index(matrixRoles, role))
	}
	return "del-" + k.Version + "-" + role
}

// TestAuthorizationMatrix checks every role × every kind the hub serves × every verb over REST against a real hub,
// with the expectations of matrixExpect.
func TestAuthorizationMatrix(t *testing.T) {
	// The project controller makes garden-dev; no other loop touches the fixtures.
	h := hubtest.Start(t, func(c *hub.Config) { c.Controllers, c.DisableScheduler = []string{"project"}, true })
	tokens := setUpProject(t, h)
	putFixtures(t, h)

	// The table covers every kind and says nothing about status for kinds without the subresource.
	for _, k := range api.Kinds {
		row, ok := matrixExpect[k.GroupResource().String()]
		if !ok {
			t.Fatalf("matrixExpect has no row for %s: every kind the hub serves needs one", k.GroupResource())
		}
		for role, verbs := range row {
			if !k.Status && slices.Contains(strings.Fields(verbs), "status") {
				t.Errorf("%s has no status subresource, yet %s is expected to update it", k.GroupResource(), role)
			}
		}
	}

	for _, k := range api.Kinds {
		t.Run(k.Version+"/"+k.Kind, func(t *testing.T) {
			row := matrixExpect[k.GroupResource().String()]
			fixture := fixtureName(k.GroupResource())
			_, fixtureJSON := h.Do(t, "GET", kindPath(k)+"/"+fixture, nil)
			for _, role := range matrixRoles {
				want := expectations(row[role])
				for _, verb := range strings.Fields(all) {
					if verb == "status" && !k.Status {
						continue
					}
					got := matrixRequest(t, h, tokens[role], k, role, verb, fixture, fixtureJSON)
					exp := want[verb]
					if exp == "" {
						exp = "deny"
					}
					if got != exp {
						t.Errorf("%s %s %s: want %s, got %s", role, verb, k.Resource, exp, got)
					}
				}
			}
		})
	}
}

// expectations turns a matrixExpect cell into verb → allow or hide.
func expectations(cell string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(cell) {
		verb, how, ok := strings.Cut(f, ":")
		if !ok {
			how = "allow"
		}
		out[verb] = how
	}
	return out
}

// matrixRequest sends one verb as role and classifies the answer: "deny" is 403 with kube-apiserver's wording
// (User "x" cannot <verb> resource ...), "hide" a 404 for a get or a list without the fixture, "allow" anything else
// (an allowed create or update may still fail validation: admission comes after authorization).
func matrixRequest(t *testing.T, h *hubtest.Hub, token string, k api.Kind, role, verb, fixture string, fixtureJSON []byte) string {
	t.Helper()
	path := kindPath(k)
	var method, body string
	kubeVerb := verb
	switch verb {
	case "get":
		method, path = "GET", path+"/"+fixture
	case "list":
		method = "GET"
	case "watch":
		return watchOutcome(t, h, token, path)
	case "create":
		name := "new-" + role
		if k.Kind == "Project" {
			name = "n" + fmt.Sprint(slices.Index(matrixRoles, role))
		}
		method, body = "POST", fmt.Sprintf(`{"metadata":{"name":%q}}`, name)
	case "update", "status":
		method, path, body = "PUT", path+"/"+fixture, string(unversioned(t, fixtureJSON))
		if verb == "status" {
			path, kubeVerb = path+"/status", "update"
		}
	case "patch":
		method, path, body = "PATCH", path+"/"+fixture, `{"metadata":{"labels":{"matrix":"`+role+`"}}}`
	case "delete":
		method, path = "DELETE", path+"/"+deleteName(k, role)
	}
	code, out := doWith(t, h, token, method, path, body)
	switch {
	case code == 401:
		t.Fatalf("%s %s %s: 401 %s", role, verb, path, out)
	case code == 403 && strings.Contains(string(out), "cannot "+kubeVerb+" resource"):
		return "deny"
	case code == 404 && (verb == "get"):
		return "hide"
	case code == 404:
		t.Errorf("%s %s %s: unexpected 404 %s", role, verb, path, out)
	case verb == "list" && code == 200 && !strings.Contains(string(out), `"name":"`+fixture+`"`):
		return "hide"
	}
	return "allow"
}

// unversioned drops metadata.resourceVersion from an object's JSON, so that an update applies to whatever is stored.
func unversioned(t *testing.T, raw []byte) []byte {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatalf("fixture %s: %v", raw, err)
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "resourceVersion")
	}
	out, _ := json.Marshal(obj)
	return out
}

func doWith(t *testing.T, h *hubtest.Hub, token, method, path, body string) (int, []byte) {
	t.Helper()
	header := []string{}
	if method == "PATCH" {
		header = []string{"Content-Type", "application/merge-patch+json"}
	}
	var b any
	if body != "" {
		b = body
	}
	return h.DoToken(t, token, method, path, b, header...)
}

// watchOutcome starts a watch and classifies it by its status, without waiting for events.
func watchOutcome(t *testing.T, h *hubtest.Hub, token, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.URL+path+"?watch=true&timeoutSeconds=5", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := h.HTTP.Do(req)
	if err != nil {
		t.Fatalf("watch %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == 403 {
		out, _ := io.ReadAll(resp.Body)
		if strings.Contains(string(out), "cannot watch resource") {
			return "deny"
		}
		t.Errorf("watch %s: 403 without kube-apiserver's wording: %s", path, out)
	}
	if resp.StatusCode != 200 {
		t.Errorf("watch %s: %d", path, resp.StatusCode)
	}
	return "allow"
}
