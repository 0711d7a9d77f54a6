package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/trellis-dev/trellis/hub/store"
	authv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/auth/v1alpha1"
)

// Access tokens are the bearer tokens of users and robot accounts: AccessToken objects (auth.trellis.dev/v1alpha1)
// hold their SHA-256, never the token.
const (
	// AccessTokenPrefix starts every access token, so that people and secret scanners recognise one.
	AccessTokenPrefix = "trl_"
	// accessTokenSecretLength is the length of the random part: 32 bytes in unpadded base64url.
	accessTokenSecretLength = 43
	// AccessTokenIDLength is the length of a token's ID (AccessTokenStatus.tokenID): the prefix and 8 characters of
	// the random part, which leaves 208 random bits unknown.
	AccessTokenIDLength = len(AccessTokenPrefix) + 8
	// TokenHashPrefix starts AccessTokenStatus.tokenHash.
	TokenHashPrefix = "sha256:"
	// UserTokenNamespace holds user tokens; AccessTokens in any other namespace are robot tokens.
	UserTokenNamespace = "trellis-system"
	// TokenHashIndex is the index of AccessTokens by status.tokenHash (see Indexes).
	TokenHashIndex = "token-hash"
)

// Resources the authenticator reads.
var (
	AccessTokens    = schema.GroupResource{Group: "auth.trellis.dev", Resource: "accesstokens"}
	ServiceAccounts = schema.GroupResource{Resource: "serviceaccounts"}
)

// ServiceAccount users, as Kubernetes names them.
const (
	ServiceAccountUserPrefix = "system:serviceaccount:"
	GroupServiceAccounts     = "system:serviceaccounts"
)

// NewAccessToken returns a new random access token: AccessTokenPrefix and 32 random bytes in base64url.
func NewAccessToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return AccessTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParseAccessToken reports whether s has the form of an access token and returns its ID.
func ParseAccessToken(s string) (id string, ok bool) {
	secret, ok := strings.CutPrefix(s, AccessTokenPrefix)
	if !ok || len(secret) != accessTokenSecretLength {
		return "", false
	}
	for i := 0; i < len(secret); i++ {
		c := secret[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return "", false
		}
	}
	// The last character carries 4 of the 256 bits and 2 bits of padding, which base64url leaves zero.
	if _, err := base64.RawURLEncoding.Strict().DecodeString(secret); err != nil {
		return "", false
	}
	return s[:AccessTokenIDLength], true
}

// AccessTokenHash returns what AccessTokenStatus.tokenHash holds for token.
func AccessTokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return TokenHashPrefix + hex.EncodeToString(h[:])
}

// TokenHashes is the index function of TokenHashIndex: an AccessToken's status.tokenHash.
func TokenHashes(obj store.Object) []string {
	t, ok := obj.(*authv1alpha1.AccessToken)
	if !ok || t.GetStatus().GetTokenHash() == "" {
		return nil
	}
	return []string{t.GetStatus().GetTokenHash()}
}

// ServiceAccountUserName returns the user name of ServiceAccount namespace/name.
func ServiceAccountUserName(namespace, name string) string {
	return ServiceAccountUserPrefix + namespace + ":" + name
}

// SplitServiceAccountUserName returns the namespace and name of a ServiceAccount's user name, and whether it is one.
func SplitServiceAccountUserName(user string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(user, ServiceAccountUserPrefix)
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	if !ok || len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", false
	}
	return namespace, name, true
}

// serviceAccountUser is the user of ServiceAccount namespace/name.
func serviceAccountUser(namespace, name string) User {
	return User{
		Name:   ServiceAccountUserName(namespace, name),
		Groups: []string{GroupServiceAccounts, GroupServiceAccounts + ":" + namespace, GroupAuthned},
	}
}
