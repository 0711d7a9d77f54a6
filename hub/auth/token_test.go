package auth

import (
	"strings"
	"testing"
)

func TestAccessTokenFormat(t *testing.T) {
	tok := NewAccessToken()
	id, ok := ParseAccessToken(tok)
	if !ok || id != tok[:AccessTokenIDLength] || !strings.HasPrefix(id, AccessTokenPrefix) || len(tok) != len(AccessTokenPrefix)+43 {
		t.Fatalf("NewAccessToken %q: ParseAccessToken gives %q, %v", tok, id, ok)
	}
	if NewAccessToken() == tok {
		t.Fatal("two tokens are equal")
	}
	for _, bad := range []string{
		"", "trl_", tok[:len(tok)-1], tok + "A", "TRL_" + tok[4:], "trl_" + strings.Repeat("!", 43),
		tok[:len(tok)-1] + "B", // the last character's padding bits must be zero (B = 000001)
		"abcdef.0123456789abcdef",
	} {
		if _, ok := ParseAccessToken(bad); ok {
			t.Errorf("ParseAccessToken(%q) accepted it", bad)
		}
	}
	if h := AccessTokenHash("x"); h != "sha256:2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881" {
		t.Errorf("AccessTokenHash: %s", h)
	}
}

func TestServiceAccountUserName(t *testing.T) {
	name := ServiceAccountUserName("garden-dev", "ci")
	if name != "system:serviceaccount:garden-dev:ci" {
		t.Fatalf("got %q", name)
	}
	if ns, n, ok := SplitServiceAccountUserName(name); !ok || ns != "garden-dev" || n != "ci" {
		t.Errorf("split: %q %q %v", ns, n, ok)
	}
	for _, bad := range []string{"alice", "system:serviceaccount:", "system:serviceaccount:ns", "system:serviceaccount:Bad:x", "system:serviceaccount:ns:"} {
		if _, _, ok := SplitServiceAccountUserName(bad); ok {
			t.Errorf("split %q: accepted", bad)
		}
	}
}

// FuzzParseAccessToken: the parser of presented bearer tokens never panics, accepts only the documented form, and
// accepts every token NewAccessToken makes.
func FuzzParseAccessToken(f *testing.F) {
	f.Add(NewAccessToken())
	f.Add("trl_")
	f.Add("abcdef.0123456789abcdef")
	f.Add("trl_" + strings.Repeat("A", 43))
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := ParseAccessToken(s)
		if !ok {
			return
		}
		if len(s) != len(AccessTokenPrefix)+accessTokenSecretLength || id != s[:AccessTokenIDLength] || !strings.HasPrefix(s, AccessTokenPrefix) {
			t.Fatalf("accepted %q with id %q", s, id)
		}
		if _, _, ok := ParseBootstrapToken(s); ok {
			t.Fatalf("%q is both an access token and a bootstrap token", s)
		}
	})
}
