package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	authv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/auth/v1alpha1"
)

// errInvalidToken is the answer for a token the hub does not know: it says no more, since whoever sent it may not
// hold any token.
var errInvalidToken = errors.New("invalid bearer token")

// authenticateAccessToken finds the AccessToken of token by its hash in the watch cache (TokenHashIndex) and checks
// it: not revoked, not being deleted, not expired, and for a robot token its ServiceAccount still the one the token
// was issued for. The failures name the AccessToken: only the token's holder hears them.
func (a *Authenticator) authenticateAccessToken(ctx context.Context, token string) (User, error) {
	r := a.reader
	if r == nil {
		return User{}, errInvalidToken
	}
	hash := AccessTokenHash(token)
	objs, err := r.ByIndex(ctx, AccessTokens, TokenHashIndex, hash)
	if err != nil {
		return User{}, fmt.Errorf("look up the bearer token: %w", err)
	}
	var t *authv1alpha1.AccessToken
	for _, o := range objs {
		if c, ok := o.(*authv1alpha1.AccessToken); ok && subtle.ConstantTimeCompare([]byte(c.GetStatus().GetTokenHash()), []byte(hash)) == 1 {
			t = c
		}
	}
	if t == nil {
		return User{}, errInvalidToken
	}
	md, spec := t.GetMetadata(), t.GetSpec()
	ref := md.GetNamespace() + "/" + md.GetName()
	switch {
	case spec.GetRevoked():
		return User{}, fmt.Errorf("token %s was revoked", ref)
	case md.GetDeletionTimestamp() != nil:
		return User{}, fmt.Errorf("token %s was revoked: it is being deleted", ref)
	case spec.GetExpirationTimestamp() == nil:
		return User{}, fmt.Errorf("token %s has no expiration", ref) // admission never lets one through
	}
	if exp := spec.GetExpirationTimestamp().AsTime(); !a.now().Before(exp) {
		return User{}, fmt.Errorf("token %s expired at %s", ref, exp.UTC().Format(time.RFC3339))
	}
	if md.GetNamespace() == UserTokenNamespace {
		if spec.GetUser() == "" {
			return User{}, fmt.Errorf("token %s names no user", ref)
		}
		groups := append([]string{}, spec.GetGroups()...)
		return User{Name: spec.GetUser(), Groups: append(groups, GroupAuthned)}, nil
	}
	sa := spec.GetServiceAccountName()
	obj, err := r.Get(ctx, ServiceAccounts, md.GetNamespace(), sa)
	switch {
	case apierrors.IsNotFound(err):
		return User{}, fmt.Errorf("token %s: its ServiceAccount %s/%s was deleted", ref, md.GetNamespace(), sa)
	case err != nil:
		return User{}, fmt.Errorf("token %s: read its ServiceAccount: %w", ref, err)
	case obj.GetMetadata().GetUid() != t.GetStatus().GetServiceAccountUid():
		return User{}, fmt.Errorf("token %s: its ServiceAccount %s/%s was deleted (the one there now is another)", ref, md.GetNamespace(), sa)
	case obj.GetMetadata().GetDeletionTimestamp() != nil:
		return User{}, fmt.Errorf("token %s: its ServiceAccount %s/%s is being deleted", ref, md.GetNamespace(), sa)
	}
	return serviceAccountUser(md.GetNamespace(), sa), nil
}
