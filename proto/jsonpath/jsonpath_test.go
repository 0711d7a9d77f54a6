package jsonpath

import (
	"bytes"
	"encoding/json"
	"testing"
)

const doc = `{
  "metadata": {"name": "x", "labels": {"shoot.gardener.cloud/status": "healthy", "a": "1"}},
  "spec": {"region": "eu", "workers": [{"name": "a", "max": 3}, {"name": "b", "max": 5}]},
  "status": {"conditions": [{"type": "APIServerAvailable", "status": "True"}, {"type": "EveryNodeReady", "status": "False"}]}
}`

func decode(t testing.TB, s string) any {
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestEval(t *testing.T) {
	v := decode(t, doc)
	for path, want := range map[string]string{
		".spec.region":   "eu",
		"{.spec.region}": "eu",
		".metadata.labels['shoot.gardener.cloud/status']":        "healthy",
		`.metadata.labels["a"]`:                                  "1",
		".spec.workers[*].name":                                  "a,b",
		".spec.workers[1].max":                                   "5",
		".spec.workers[-1].name":                                 "b",
		".spec.workers[7].name":                                  "",
		`.status.conditions[?(@.type=="EveryNodeReady")].status`: "False",
		`.status.conditions[?(@.status != "True")].type`:         "EveryNodeReady",
		`.spec.workers[?(@.max==3)].name`:                        "a",
		".metadata.labels[*]":                                    "1,healthy",
		".spec.missing.deeper":                                   "",
		".spec.region.deeper":                                    "",
	} {
		p, err := Parse(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if got := Format(p.Eval(v)); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	if got := Format(MustParse(".").Eval(decode(t, `{"a":1}`))); got != `{"a":1}` {
		t.Errorf(". = %s", got)
	}
	for _, bad := range []string{"", "spec", ".", ".a[", ".a[x]", ".a['x", `.a[?(@.b~"x")]`, ".a[?(@.b==x)]", ".a..b"} {
		if bad == "." {
			continue
		}
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{".spec.region", `.status.conditions[?(@.type=="X")].status`, ".a[*].b[-1]", "{.a['b.c']}", "."} {
		f.Add(s)
	}
	v := decode(f, doc)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			return
		}
		_ = Format(p.Eval(v))
	})
}
