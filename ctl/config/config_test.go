package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dir", "config")
	c, err := Load(path)
	if err != nil || len(c.Contexts) != 0 {
		t.Fatalf("missing file: %v %v", c, err)
	}
	c.SetContext(Context{Name: "a", Hub: "https://h:1", Token: "t", CertificateAuthorityData: []byte("PEM")})
	c.SetContext(Context{Name: "b", Hub: "h2:2"})
	c.SetContext(Context{Name: "a", Hub: "https://h:1", Token: "t2"})
	c.CurrentContext = "a"
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", st.Mode(), err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Contexts) != 2 || got.Contexts[0].Token != "t2" || got.CurrentContext != "a" {
		t.Fatalf("loaded %+v", got)
	}
	if !got.DeleteContext("a") || got.CurrentContext != "" || got.DeleteContext("a") {
		t.Fatalf("delete: %+v", got)
	}
	for _, bad := range []string{
		"apiVersion: trellis.dev/v1alpha1\nkind: Config\ncontexts:\n- name: a\n  hubb: x\n", // unknown field
		"apiVersion: v1\nkind: Config\n", // kubeconfig
		"apiVersion: trellis.dev/v1alpha1\nkind: Config\ncontexts:\n- name: a\n- name: a\n", // duplicate
		"apiVersion: trellis.dev/v1alpha1\nkind: Config\ncontexts:\n- hub: x\n",             // no name
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("ENV-CA"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Config{APIVersion: APIVersion, Kind: Kind, CurrentContext: "prod", Contexts: []Context{
		{Name: "prod", Hub: "hub.example:8443", CertificateAuthorityData: []byte("CTX-CA"), Token: "ctx-token", Project: "dev"},
		{Name: "other", Hub: "https://other:1", Token: "other-token", Namespace: "ns1"},
	}}
	tests := []struct {
		name  string
		flags Overrides
		env   map[string]string
		want  Target
		err   string
	}{
		{name: "current context", want: Target{Context: "prod", Hub: "https://hub.example:8443", CA: []byte("CTX-CA"), Token: "ctx-token", Project: "dev"}},
		{name: "--context", flags: Overrides{Context: "other"}, want: Target{Context: "other", Hub: "https://other:1", Token: "other-token", Namespace: "ns1"}},
		{name: "env token overrides", env: map[string]string{"TRELLIS_TOKEN": "env-token"},
			want: Target{Context: "prod", Hub: "https://hub.example:8443", CA: []byte("CTX-CA"), Token: "env-token", Project: "dev"}},
		{name: "env for the same hub keeps the context's credentials", env: map[string]string{"TRELLIS_HUB": "https://hub.example:8443/"},
			want: Target{Context: "prod", Hub: "https://hub.example:8443", CA: []byte("CTX-CA"), Token: "ctx-token", Project: "dev"}},
		{name: "env for another hub drops the context's credentials", env: map[string]string{"TRELLIS_HUB": "127.0.0.1:8443", "TRELLIS_CA": ca},
			want: Target{Context: "prod", Hub: "https://127.0.0.1:8443", CA: []byte("ENV-CA"), Project: "dev"}},
		{name: "flags over env", flags: Overrides{Token: "flag-token", Namespace: "x"}, env: map[string]string{"TRELLIS_TOKEN": "env-token"},
			want: Target{Context: "prod", Hub: "https://hub.example:8443", CA: []byte("CTX-CA"), Token: "flag-token", Namespace: "x"}},
		{name: "flag hub over env hub", flags: Overrides{Hub: "h:1"}, env: map[string]string{"TRELLIS_HUB": "h:2", "TRELLIS_TOKEN": "e"},
			want: Target{Context: "prod", Hub: "https://h:1", Token: "e", Project: "dev"}},
		{name: "missing context", flags: Overrides{Context: "nope"}, err: `no context "nope"`},
		{name: "plain http", flags: Overrides{Hub: "http://h:1"}, err: "TLS only"},
		{name: "missing CA file", env: map[string]string{"TRELLIS_CA": filepath.Join(dir, "nope")}, err: "reading the hub's CA"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Resolve(tc.flags, env(tc.env))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Context != tc.want.Context || got.Hub != tc.want.Hub || string(got.CA) != string(tc.want.CA) || got.Token != tc.want.Token ||
				got.Namespace != tc.want.Namespace || got.Project != tc.want.Project {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	empty := &Config{APIVersion: APIVersion, Kind: Kind}
	if got, err := empty.Resolve(Overrides{}, env(nil)); err != nil || got.Hub != DefaultHub || got.Token != "" {
		t.Fatalf("defaults: %+v %v", got, err)
	}
	if _, err := (&Config{CurrentContext: "gone"}).Resolve(Overrides{}, env(nil)); err == nil {
		t.Fatal("a missing current context was accepted")
	}
}

func TestPath(t *testing.T) {
	if p := Path(env(map[string]string{"TRELLISCONFIG": "/x/c", "HOME": "/h"})); p != "/x/c" {
		t.Error(p)
	}
	if p := Path(env(map[string]string{"HOME": "/h"})); p != "/h/.trellis/config" {
		t.Error(p)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("apiVersion: trellis.dev/v1alpha1\nkind: Config\ncurrent-context: a\ncontexts:\n- name: a\n  hub: h:1\n  certificate-authority-data: UEVN\n"))
	f.Add([]byte(`{"contexts":[{"name":"a","token":"t"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse returned an invalid configuration: %v", err)
		}
	})
}
