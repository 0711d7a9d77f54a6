package hub_test

import (
	"github.com/trellis-dev/trellis/test/gardenerexamples"

	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/hub/api"
	"github.com/trellis-dev/trellis/test/hubtest"
)

type manifest struct {
	file string
	obj  map[string]any
	kind api.Kind
}

// TestGardenerExamplesRoundTrip POSTs every example manifest whose kind the hub serves to its REST path and checks
// that the object read back carries every field that was sent, with the same name, JSON type and value.
func TestGardenerExamplesRoundTrip(t *testing.T) {
	dir := gardenerexamples.Dir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s: %v", dir, err)
	}
	num := func(f string) int { n, _ := strconv.Atoi(strings.SplitN(filepath.Base(f), "-", 2)[0]); return n }
	sort.SliceStable(files, func(i, j int) bool { return num(files[i]) < num(files[j]) })

	var ms []manifest
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if obj == nil {
				continue
			}
			av, _ := obj["apiVersion"].(string)
			kd, _ := obj["kind"].(string)
			k, ok := api.KindFor(av, kd)
			if !ok {
				t.Logf("%s: %s %s is not served by the hub, skipped", filepath.Base(f), av, kd)
				continue
			}
			ms = append(ms, manifest{file: filepath.Base(f), obj: gardenerexamples.Fill(obj).(map[string]any), kind: k})
		}
	}
	if len(ms) < 15 {
		t.Fatalf("only %d served manifests found", len(ms))
	}

	h := hubtest.Start(t)
	// The example Seed and Shoot name extension types (provider local, calico networking, the aws-route53 DNS
	// provider, the extension foobar): registered as their extensions would be.
	h.RegisterExtensions(t, "examples", append(hubtest.LocalExtensions(), "Network/calico", "DNSRecord/aws-route53", "Extension/foobar")...)
	// The examples use namespaces garden (seed secret, managed seeds; the hub creates it) and garden-trial (quota)
	// without manifests.
	for _, ns := range []string{"garden-trial"} {
		if code, body := h.Do(t, "POST", "/api/v1/namespaces", `{"metadata":{"name":"`+ns+`"}}`); code != 201 {
			t.Fatalf("create namespace %s: %d %s", ns, code, body)
		}
	}
	for _, m := range ms {
		t.Run(m.file+"/"+m.kind.Kind, func(t *testing.T) {
			if m.kind.Kind == "Bastion" {
				// Gardener's example Bastion names a shoot the examples do not hold; admission wants it to exist and
				// be scheduled: the example Shoot, on the example Seed, under that name.
				shootRef, _ := m.obj["spec"].(map[string]any)["shootRef"].(map[string]any)
				createScheduledShoot(t, h, ms, shootRef["name"].(string))
			}
			sent, _ := json.Marshal(m.obj)
			md := m.obj["metadata"].(map[string]any)
			name, _ := md["name"].(string)
			ns, _ := md["namespace"].(string)
			code, body := h.Do(t, "POST", collectionPath(m.kind, ns), sent)
			if code != 201 {
				t.Fatalf("POST %s: %d %s", collectionPath(m.kind, ns), code, body)
			}
			code, body = h.Do(t, "GET", collectionPath(m.kind, ns)+"/"+name, nil)
			if code != 200 {
				t.Fatalf("GET: %d %s", code, body)
			}
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			want := m.obj
			if m.kind.Kind == "Project" {
				want = withOwnerMember(t, m.obj)
			}
			for _, d := range diffSent("", want, got) {
				t.Error(d)
			}
		})
	}
}

// withOwnerMember returns a copy of a Project manifest with its owner appended to the members as Gardener's admission
// appends it (roles admin and owner) when the owner is not a member.
func withOwnerMember(t *testing.T, project map[string]any) map[string]any {
	t.Helper()
	raw, _ := json.Marshal(project)
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	spec := p["spec"].(map[string]any)
	owner, ok := spec["owner"].(map[string]any)
	if !ok {
		return p
	}
	members, _ := spec["members"].([]any)
	for _, m := range members {
		if m.(map[string]any)["name"] == owner["name"] && m.(map[string]any)["kind"] == owner["kind"] {
			return p
		}
	}
	member := map[string]any{"role": "admin", "roles": []any{"owner"}}
	for k, v := range owner {
		member[k] = v
	}
	spec["members"] = append(members, member)
	return p
}

// createScheduledShoot creates the example Shoot of ms under name, scheduled to the example Seed of ms.
func createScheduledShoot(t *testing.T, h *hubtest.Hub, ms []manifest, name string) {
	t.Helper()
	var shoot, seed map[string]any
	for _, m := range ms {
		switch m.kind.Kind {
		case "Shoot":
			shoot = m.obj
		case "Seed":
			seed = m.obj
		}
	}
	if shoot == nil || seed == nil {
		t.Fatal("no example Shoot or Seed")
	}
	raw, _ := json.Marshal(shoot)
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	s["metadata"].(map[string]any)["name"] = name
	s["spec"].(map[string]any)["seedName"] = seed["metadata"].(map[string]any)["name"]
	ns, _ := s["metadata"].(map[string]any)["namespace"].(string)
	k, _ := api.KindFor("core.gardener.cloud/v1beta1", "Shoot")
	if code, body := h.Do(t, "POST", collectionPath(k, ns), s); code != 201 {
		t.Fatalf("create the scheduled shoot %s the example Bastion names: %d %s", name, code, body)
	}
}

func collectionPath(k api.Kind, ns string) string {
	p := "/apis/" + k.Group + "/" + k.Version
	if k.Group == "" {
		p = "/api/" + k.Version
	}
	if k.Namespaced {
		p += "/namespaces/" + ns
	}
	return p + "/" + k.Resource
}

// diffSent lists every field of sent missing from got or different in JSON type or value. Empty lists, empty
// objects and nulls count as absent, as Kubernetes' omitempty treats them.
func diffSent(path string, sent, got any) []string {
	if isEmpty(sent) {
		return nil
	}
	switch s := sent.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: sent an object, got %T", path, got)}
		}
		var out []string
		for k, v := range s {
			p := strings.TrimPrefix(path+"."+k, ".")
			gv, present := g[k]
			if !present && !isEmpty(v) {
				out = append(out, fmt.Sprintf("%s: sent %v, missing in the object read back", p, v))
				continue
			}
			out = append(out, diffSent(p, v, gv)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(s) {
			return []string{fmt.Sprintf("%s: sent a list of %d, got %v", path, len(s), got)}
		}
		var out []string
		for i := range s {
			out = append(out, diffSent(fmt.Sprintf("%s[%d]", path, i), s[i], g[i])...)
		}
		return out
	default:
		if fmt.Sprintf("%T:%v", sent, sent) != fmt.Sprintf("%T:%v", got, got) {
			return []string{fmt.Sprintf("%s: sent %T %v, got %T %v", path, sent, sent, got, got)}
		}
	}
	return nil
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}
