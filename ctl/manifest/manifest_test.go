package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("b.yaml", "# comment\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n--- # next\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: a\ndata:\n  x: \"---\"\n---\n")
	write("a.json", `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"a"}}]}`)
	write("ignored.txt", "not a manifest")
	write("sub/c.yml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: sub\n")
	docs, err := Read([]string{dir}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range docs {
		got = append(got, d.Kind+"/"+d.Namespace+"/"+d.Name+"@"+filepath.Base(d.Source))
	}
	want := "Secret/a/s@a.json#1.items[0] Namespace//a@b.yaml#2 ConfigMap/a/c@b.yaml#3"
	if strings.Join(got, " ") != want {
		t.Fatalf("got %v\nwant %s", got, want)
	}
	if docs, err = Read([]string{dir}, true, nil); err != nil || len(docs) != 4 {
		t.Fatalf("recursive: %d documents, %v", len(docs), err)
	}
	if docs, err = Read([]string{"-"}, false, strings.NewReader(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}`)); err != nil || len(docs) != 1 || docs[0].Name != "x" {
		t.Fatalf("stdin: %v %v", docs, err)
	}
	for _, bad := range []string{"kind: Namespace\n", "- a\n- b\n", "apiVersion: v1\nkind: [\n"} {
		if _, err := Parse("bad", []byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if _, err := Read([]string{filepath.Join(dir, "missing.yaml")}, false, nil); err == nil {
		t.Error("a missing file was accepted")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: List\nitems: []\n"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"ShootList","items":[{"apiVersion":"v1","kind":"X"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := Parse("fuzz", data)
		if err != nil {
			return
		}
		for _, d := range docs {
			if d.APIVersion == "" || d.Kind == "" || len(d.JSON) == 0 {
				t.Fatalf("document without apiVersion, kind or JSON: %+v", d)
			}
		}
	})
}
