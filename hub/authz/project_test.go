package authz_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/hub"
	"github.com/trellis-dev/trellis/test/hubtest"
)

const projectsPath = "/apis/core.gardener.cloud/v1beta1/projects"

// mustAs sends a request with token and fails the test unless it answers want; a 403 must carry want403 when set.
func mustAs(t *testing.T, h *hubtest.Hub, token string, want int, method, path, body string, contains ...string) []byte {
	t.Helper()
	code, out := doWith(t, h, token, method, path, body)
	if code != want {
		t.Fatalf("%s %s: want %d, got %d %s", method, path, want, code, out)
	}
	for _, c := range contains {
		if !strings.Contains(string(out), c) {
			t.Errorf("%s %s: want a body containing %q, got %s", method, path, c, out)
		}
	}
	return out
}

// itemNames returns the names of a list's items.
func itemNames(t *testing.T, raw []byte) []string {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata struct{ Name, Namespace string }
		}
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("list %s: %v", raw, err)
	}
	var out []string
	for _, it := range list.Items {
		n := it.Metadata.Name
		if it.Metadata.Namespace != "" {
			n = it.Metadata.Namespace + "/" + n
		}
		out = append(out, n)
	}
	return out
}

// TestProjectMembers: creating a project makes the creator its owner; the owner and uam manage human members,
// admins manage service account members and the rest of the project; the tolerations whitelist is for cluster
// admins; groups are members too.
func TestProjectMembers(t *testing.T) {
	h := hubtest.Start(t, func(c *hub.Config) { c.Controllers, c.DisableScheduler = []string{"project"}, true })
	olivia, adam, uma, gina := h.UserToken(t, "olivia"), h.UserToken(t, "adam"), h.UserToken(t, "uma"), h.UserToken(t, "gina", "team-a")

	// The creator becomes createdBy, owner, and a member with roles admin and owner.
	out := mustAs(t, h, olivia, 201, "POST", projectsPath, `{"metadata":{"name":"dev"},"spec":{"members":[
		{"kind":"User","name":"adam","role":"admin"},{"kind":"User","name":"uma","role":"uam"},{"kind":"Group","name":"team-a","role":"viewer"}]}}`)
	var p struct {
		Spec struct {
			CreatedBy, Owner struct{ Kind, Name, APIGroup string }
			Members          []struct {
				Kind, Name, Role string
				Roles            []string
			}
		}
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	last := p.Spec.Members[len(p.Spec.Members)-1]
	if p.Spec.CreatedBy.Name != "olivia" || p.Spec.Owner.Name != "olivia" || p.Spec.Owner.Kind != "User" ||
		last.Name != "olivia" || last.Role != "admin" || !slices.Equal(last.Roles, []string{"owner"}) || p.Spec.Members[0].Kind != "User" {
		t.Errorf("created project: want olivia as creator, owner and admin+owner member, got %s", out)
	}
	h.WaitNamespace(t, "garden-dev")

	// Human members: the owner and uam may change them, an admin may not; service accounts need only update.
	addHuman := `{"spec":{"members":[{"kind":"User","name":"adam","role":"admin"},{"kind":"User","name":"uma","role":"uam"},
		{"kind":"Group","name":"team-a","role":"viewer"},{"kind":"User","name":"olivia","role":"admin","roles":["owner"]},
		{"kind":"User","name":"new","role":"viewer"}]}}`
	mustAs(t, h, adam, 403, "PATCH", projectsPath+"/dev", addHuman, `is not allowed to manage human users or groups in .spec.members`)
	mustAs(t, h, uma, 200, "PATCH", projectsPath+"/dev", addHuman)
	addRobot := `{"spec":{"members":[{"kind":"User","name":"adam","role":"admin"},{"kind":"User","name":"uma","role":"uam"},
		{"kind":"Group","name":"team-a","role":"viewer"},{"kind":"User","name":"olivia","role":"admin","roles":["owner"]},
		{"kind":"User","name":"new","role":"admin"},{"kind":"ServiceAccount","name":"ci","namespace":"garden-dev","role":"admin"}]}}`
	mustAs(t, h, adam, 200, "PATCH", projectsPath+"/dev", addRobot) // a role change of a human and a new robot
	mustAs(t, h, adam, 200, "PATCH", projectsPath+"/dev", `{"spec":{"description":"the dev project"}}`)
	mustAs(t, h, olivia, 200, "PATCH", projectsPath+"/dev", `{"spec":{"members":[{"kind":"User","name":"adam","role":"admin"},{"kind":"User","name":"uma","role":"uam"},
		{"kind":"Group","name":"team-a","role":"viewer"}]}}`) // the owner removes humans; the owner stays a member
	_, got := h.Do(t, "GET", projectsPath+"/dev", nil)
	if !strings.Contains(string(got), `"name":"olivia","role":"admin","roles":["owner"]`) || strings.Contains(string(got), `"new"`) {
		t.Errorf("after the owner's change: want olivia kept as owner member and new gone, got %s", got)
	}

	// The tolerations whitelist is for cluster admins, on update and on create.
	mustAs(t, h, olivia, 403, "PATCH", projectsPath+"/dev", `{"spec":{"tolerations":{"whitelist":[{"key":"x"}]}}}`, "modify .spec.tolerations.whitelist")
	mustAs(t, h, h.Token, 200, "PATCH", projectsPath+"/dev", `{"spec":{"tolerations":{"whitelist":[{"key":"x"}]}}}`)
	mustAs(t, h, adam, 403, "POST", projectsPath, `{"metadata":{"name":"tol"},"spec":{"tolerations":{"whitelist":[{"key":"x"}]}}}`, "modify .spec.tolerations.whitelist")
	// A creator who makes someone else the owner may not add human members.
	mustAs(t, h, adam, 403, "POST", projectsPath, `{"metadata":{"name":"gift"},"spec":{"owner":{"kind":"User","name":"zoe"},"members":[{"kind":"User","name":"yan","role":"viewer"}]}}`,
		"manage human users")

	// A group member reads as a viewer: it sees the project and its namespace, not its secrets.
	mustAs(t, h, gina, 200, "GET", projectsPath+"/dev", "")
	mustAs(t, h, gina, 200, "GET", "/api/v1/namespaces/garden-dev", "")
	mustAs(t, h, gina, 403, "GET", "/api/v1/namespaces/garden-dev/secrets", "", `cannot list resource \"secrets\"`)

	// Admins may change the project's NamespacedCloudProfiles but not their Kubernetes versions (cluster admins').
	mustAs(t, h, adam, 403, "POST", "/apis/core.gardener.cloud/v1beta1/namespaces/garden-dev/namespacedcloudprofiles",
		`{"metadata":{"name":"ncp"},"spec":{"parent":{"kind":"CloudProfile","name":"local"},"kubernetes":{"versions":[{"version":"1.35.4"}]}}}`, "modify .spec.kubernetes")

	// An admin may delete the project (with Gardener's confirmation), a viewer may not.
	mustAs(t, h, gina, 403, "DELETE", projectsPath+"/dev", "", `cannot delete resource \"projects\"`)
	mustAs(t, h, adam, 403, "DELETE", projectsPath+"/dev", "", "confirmation.gardener.cloud/deletion")
}

// TestProjectIsolation: nobody outside a project sees it. Lists and watches are filtered (also across namespaces),
// gets of its Project and Namespace are NotFound, writes into its namespace Forbidden; a member who leaves stops
// seeing it at once, and a watch tells so.
func TestProjectIsolation(t *testing.T) {
	h := hubtest.Start(t, func(c *hub.Config) { c.Controllers, c.DisableScheduler = []string{"project"}, true })
	ann, ben := h.UserToken(t, "ann"), h.UserToken(t, "ben")
	mustAs(t, h, ann, 201, "POST", projectsPath, `{"metadata":{"name":"a"},"spec":{"members":[{"kind":"User","name":"ben","role":"viewer"}]}}`)
	mustAs(t, h, ben, 201, "POST", projectsPath, `{"metadata":{"name":"b"}}`)
	for _, ns := range []string{"garden-a", "garden-b"} {
		h.WaitNamespace(t, ns)
		mustAdmin(t, h, 201, "POST", "/api/v1/namespaces/"+ns+"/configmaps", `{"metadata":{"name":"cm"}}`)
	}

	// ann sees project a only.
	if got := itemNames(t, mustAs(t, h, ann, 200, "GET", projectsPath, "")); !slices.Equal(got, []string{"a"}) {
		t.Errorf("ann lists projects: want [a], got %v", got)
	}
	if got := itemNames(t, mustAs(t, h, ann, 200, "GET", "/api/v1/namespaces", "")); !slices.Equal(got, []string{"garden-a"}) {
		t.Errorf("ann lists namespaces: want [garden-a], got %v", got)
	}
	if got := itemNames(t, mustAs(t, h, ann, 200, "GET", "/api/v1/configmaps", "")); !slices.Equal(got, []string{"garden-a/cm"}) {
		t.Errorf("ann lists config maps in all namespaces: want [garden-a/cm], got %v", got)
	}
	mustAs(t, h, ann, 404, "GET", projectsPath+"/b", "")
	mustAs(t, h, ann, 404, "GET", projectsPath+"/nonexistent", "")
	mustAs(t, h, ann, 404, "GET", "/api/v1/namespaces/garden-b", "")
	mustAs(t, h, ann, 404, "GET", "/api/v1/namespaces/kube-system", "")
	mustAs(t, h, ann, 403, "GET", "/api/v1/namespaces/garden-b/configmaps/cm", "", `User \"ann\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"garden-b\"`)
	mustAs(t, h, ann, 403, "POST", "/api/v1/namespaces/garden-b/configmaps", `{"metadata":{"name":"x"}}`, `cannot create resource \"configmaps\"`)
	mustAs(t, h, ann, 403, "DELETE", projectsPath+"/b", "", `cannot delete resource \"projects\"`)
	// Every user reads the global resources and the cluster identity.
	mustAs(t, h, ann, 200, "GET", "/apis/core.gardener.cloud/v1beta1/cloudprofiles", "")
	mustAs(t, h, ann, 200, "GET", "/api/v1/namespaces/kube-system/configmaps/cluster-identity", "")
	mustAs(t, h, ann, 403, "GET", "/api/v1/namespaces/kube-system/configmaps", "")

	// ben, a viewer of a, watches projects and namespaces; removed from a, he gets both as DELETED.
	watchProjects := startWatch(t, h, ben, projectsPath)
	watchNamespaces := startWatch(t, h, ben, "/api/v1/namespaces")
	for _, w := range []struct {
		events <-chan string
		want   []string
	}{{watchProjects, []string{"ADDED a", "ADDED b"}}, {watchNamespaces, []string{"ADDED garden-a", "ADDED garden-b"}}} {
		if got := collect(t, w.events, len(w.want)); !slices.Equal(sorted(got), w.want) {
			t.Errorf("ben's watch: want %v, got %v", w.want, got)
		}
	}
	mustAs(t, h, ann, 200, "PATCH", projectsPath+"/a", `{"spec":{"members":[]}}`)
	if got := collect(t, watchProjects, 1); !slices.Equal(got, []string{"DELETED a"}) {
		t.Errorf("ben's project watch after his removal: want [DELETED a], got %v", got)
	}
	// A namespace's visibility follows another object (its project): lists and gets tell at once, a watch at the
	// namespace's next change.
	mustAs(t, h, ben, 404, "GET", projectsPath+"/a", "")
	mustAs(t, h, ben, 404, "GET", "/api/v1/namespaces/garden-a", "")
	if got := itemNames(t, mustAs(t, h, ben, 200, "GET", "/api/v1/namespaces", "")); !slices.Equal(got, []string{"garden-b"}) {
		t.Errorf("ben lists namespaces after his removal: want [garden-b], got %v", got)
	}
	mustAdmin(t, h, 200, "PATCH", "/api/v1/namespaces/garden-a", `{"metadata":{"labels":{"touched":"true"}}}`)
	if got := collect(t, watchNamespaces, 1); !slices.Equal(got, []string{"DELETED garden-a"}) {
		t.Errorf("ben's namespace watch after his removal: want [DELETED garden-a], got %v", got)
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// startWatch starts a REST watch with token and returns its events as "TYPE name".
func startWatch(t *testing.T, h *hubtest.Hub, token, path string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", h.URL+path+"?watch=true", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Transport: h.HTTP.Transport}
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch %s: %v %v", path, resp, err)
	}
	events := make(chan string, 100)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev struct {
				Type   string
				Object struct{ Metadata struct{ Name string } }
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type != "BOOKMARK" {
				events <- ev.Type + " " + ev.Object.Metadata.Name
			}
		}
	}()
	return events
}

// collect waits for n events, skipping MODIFIED ones (the project controller's status writes).
func collect(t *testing.T, events <-chan string, n int) []string {
	t.Helper()
	var got []string
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case ev := <-events:
			if !strings.HasPrefix(ev, "MODIFIED ") {
				got = append(got, ev)
			}
		case <-timeout:
			t.Fatalf("want %d events, got %v", n, got)
		}
	}
	return got
}
