package auth

import (
	"context"
	"crypto/subtle"
	"fmt"
	"regexp"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/trellis-dev/trellis/hub/store"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/objectnames"
)

// BootstrapTokenNamespace holds the bootstrap token Secrets, as in Kubernetes.
const BootstrapTokenNamespace = "kube-system"

var (
	bootstrapTokenRE = regexp.MustCompile(bootstrapapi.BootstrapTokenPattern)
	secretsResource  = schema.GroupResource{Resource: "secrets"}
)

// ObjectReader reads objects from the hub's watch cache; *api.Registry is one.
type ObjectReader interface {
	Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (store.Object, error)
	// ByIndex returns the objects of a resource whose index yields value (AccessTokens by TokenHashIndex).
	ByIndex(ctx context.Context, gr schema.GroupResource, index, value string) ([]store.Object, error)
}

// syncingReader is an ObjectReader whose cache can catch up with etcd on demand (*api.Registry, store.Collection.Sync).
type syncingReader interface {
	// Sync waits until the resource's cache reflects every write committed to etcd before the call, by any replica.
	Sync(ctx context.Context, gr schema.GroupResource) error
}

// ParseBootstrapToken splits a bearer token of the bootstrap token form "<id>.<secret>" ([a-z0-9]{6}.[a-z0-9]{16}).
func ParseBootstrapToken(token string) (id, secret string, ok bool) {
	m := bootstrapTokenRE.FindStringSubmatch(token)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// BootstrapTokenSecretName returns the name of the Secret in kube-system that defines bootstrap token id.
func BootstrapTokenSecretName(id string) string { return bootstrapapi.BootstrapTokenSecretPrefix + id }

// authenticateBootstrap checks a bootstrap token against its Secret as Kubernetes' bootstrap token authenticator
// does: type bootstrap.kubernetes.io/token, matching token-id and token-secret (compared in constant time),
// usage-bootstrap-authentication "true", an expiration (RFC 3339) not passed, and extra groups of the form
// system:bootstrappers:<name>. Details of a failure are told only to whoever holds the token's secret.
func (a *Authenticator) authenticateBootstrap(ctx context.Context, id, secret string) (User, error) {
	r := a.reader
	if r == nil {
		return User{}, fmt.Errorf("bootstrap token %s: bootstrap tokens are not accepted yet", id)
	}
	name := BootstrapTokenSecretName(id)
	obj, err := r.Get(ctx, secretsResource, BootstrapTokenNamespace, name)
	if sr, ok := r.(syncingReader); ok && apierrors.IsNotFound(err) {
		// Created a moment ago through another hub replica? Look again once this replica's cache has caught up with
		// etcd: an operator creates the token and starts the agent, whichever replica either reaches.
		if serr := sr.Sync(ctx, secretsResource); serr == nil {
			obj, err = r.Get(ctx, secretsResource, BootstrapTokenNamespace, name)
		}
	}
	if apierrors.IsNotFound(err) {
		return User{}, fmt.Errorf("bootstrap token %s: secret %s/%s not found", id, BootstrapTokenNamespace, name)
	}
	if err != nil {
		return User{}, fmt.Errorf("bootstrap token %s: %w", id, err)
	}
	s, ok := obj.(*kcorev1.Secret)
	if !ok || s.GetType() != string(bootstrapapi.SecretTypeBootstrapToken) {
		return User{}, fmt.Errorf("bootstrap token %s: secret %s/%s is not of type %s", id, BootstrapTokenNamespace, name, bootstrapapi.SecretTypeBootstrapToken)
	}
	data := s.GetData()
	if subtle.ConstantTimeCompare(data[bootstrapapi.BootstrapTokenSecretKey], []byte(secret)) != 1 {
		return User{}, fmt.Errorf("bootstrap token %s: the secret does not match", id)
	}
	if got := string(data[bootstrapapi.BootstrapTokenIDKey]); got != id {
		return User{}, fmt.Errorf("bootstrap token %s: secret %s/%s has token-id %q", id, BootstrapTokenNamespace, name, got)
	}
	if s.GetMetadata().GetDeletionTimestamp() != nil {
		return User{}, fmt.Errorf("bootstrap token %s is being deleted", id)
	}
	if exp, ok := data[bootstrapapi.BootstrapTokenExpirationKey]; ok {
		t, err := time.Parse(time.RFC3339, string(exp))
		if err != nil {
			return User{}, fmt.Errorf("bootstrap token %s: invalid expiration %q (want RFC 3339)", id, exp)
		}
		if !a.now().Before(t) {
			return User{}, fmt.Errorf("bootstrap token %s expired at %s", id, t.UTC().Format(time.RFC3339))
		}
	}
	if string(data[bootstrapapi.BootstrapTokenUsageAuthentication]) != "true" {
		return User{}, fmt.Errorf("bootstrap token %s may not be used for authentication (%s is not \"true\")", id, bootstrapapi.BootstrapTokenUsageAuthentication)
	}
	groups := []string{bootstrapapi.BootstrapDefaultGroup, GroupAuthned}
	if extra := strings.TrimSpace(string(data[bootstrapapi.BootstrapTokenExtraGroupsKey])); extra != "" {
		for _, g := range strings.Split(extra, ",") {
			g = strings.TrimSpace(g)
			if err := bootstraputil.ValidateBootstrapGroupName(g); err != nil {
				return User{}, fmt.Errorf("bootstrap token %s: %s: %w", id, bootstrapapi.BootstrapTokenExtraGroupsKey, err)
			}
			groups = append(groups, g)
		}
	}
	return User{
		Name:                      bootstrapapi.BootstrapUserPrefix + id,
		Groups:                    groups,
		BootstrapTokenID:          id,
		BootstrapTokenDescription: string(data[bootstrapapi.BootstrapTokenDescriptionKey]),
	}, nil
}

// BootstrapToken is a bootstrap token and what its Secret says about it.
type BootstrapToken struct {
	// ID is the public part, [a-z0-9]{6}; the Secret is named bootstrap-token-<ID>.
	ID string
	// Secret is the private part, [a-z0-9]{16}.
	Secret string
	// Description says what the token is for; for a seed agent's token it names the seed (SeedOfDescription).
	Description string
	// Expiration is when the token stops authenticating; zero for never.
	Expiration time.Time
	// ExtraGroups are groups of the form system:bootstrappers:<name> the token's user is in besides
	// system:bootstrappers.
	ExtraGroups []string
}

// NewSeedBootstrapToken returns a random bootstrap token for the agent of seed, expiring at expiration (zero: never).
// Store its SecretObject in the hub and hand Token to the agent.
func NewSeedBootstrapToken(seed string, expiration time.Time) (BootstrapToken, error) {
	tok, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return BootstrapToken{}, err
	}
	id, secret, ok := ParseBootstrapToken(tok)
	if !ok {
		return BootstrapToken{}, fmt.Errorf("generated bootstrap token has an unexpected form")
	}
	return BootstrapToken{ID: id, Secret: secret, Description: objectnames.SeedBootstrapTokenDescription(seed), Expiration: expiration}, nil
}

// Token returns the bearer token "<id>.<secret>".
func (t BootstrapToken) Token() string { return t.ID + "." + t.Secret }

// SecretObject returns the Secret kube-system/bootstrap-token-<id> that makes the token valid, in Kubernetes' format
// (as Gardener writes them: usable for authentication and signing).
func (t BootstrapToken) SecretObject() *kcorev1.Secret {
	data := map[string][]byte{
		bootstrapapi.BootstrapTokenIDKey:               []byte(t.ID),
		bootstrapapi.BootstrapTokenSecretKey:           []byte(t.Secret),
		bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
		bootstrapapi.BootstrapTokenUsageSigningKey:     []byte("true"),
	}
	if t.Description != "" {
		data[bootstrapapi.BootstrapTokenDescriptionKey] = []byte(t.Description)
	}
	if !t.Expiration.IsZero() {
		data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(t.Expiration.UTC().Format(time.RFC3339))
	}
	if len(t.ExtraGroups) > 0 {
		data[bootstrapapi.BootstrapTokenExtraGroupsKey] = []byte(strings.Join(t.ExtraGroups, ","))
	}
	return &kcorev1.Secret{
		ApiVersion: "v1",
		Kind:       "Secret",
		Metadata:   &metav1.ObjectMeta{Name: BootstrapTokenSecretName(t.ID), Namespace: BootstrapTokenNamespace},
		Type:       string(bootstrapapi.SecretTypeBootstrapToken),
		Data:       data,
	}
}

// SeedOfDescription returns the seed named by the description of a seed agent's bootstrap token, or "" when the
// description is not one.
func SeedOfDescription(desc string) string {
	seed := objectnames.SeedOfBootstrapTokenDescription(desc)
	if _, ok := SeedOfUserName(SeedUserPrefix + seed); seed == "" || !ok {
		return ""
	}
	return seed
}
