package managedseed

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/objectnames"
)

// tokenNamespace holds bootstrap token Secrets on the hub, as in Kubernetes.
const tokenNamespace = "kube-system"

// token returns the bootstrap token for the agent of the ManagedSeed key (registering seed): the one made before
// while more than a quarter of its validity is left, else a new one, stored on the hub (the old one is deleted).
func (c *Controller) token(ctx context.Context, key, seed string) (token, error) {
	now := c.cfg.Now()
	c.mu.Lock()
	old, ok := c.tokens[key]
	c.mu.Unlock()
	if ok && now.Before(old.expires.Add(-c.cfg.TokenValidity/4)) {
		return old, nil
	}
	raw, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return token{}, err
	}
	id, secret, _ := strings.Cut(raw, ".")
	t := token{id: id, secret: secret, expires: now.Add(c.cfg.TokenValidity).Truncate(time.Second)}
	obj := &kcorev1.Secret{ApiVersion: "v1", Kind: "Secret",
		Metadata: &metav1.ObjectMeta{Namespace: tokenNamespace, Name: bootstrapapi.BootstrapTokenSecretPrefix + id},
		Type:     string(bootstrapapi.SecretTypeBootstrapToken),
		Data: map[string][]byte{
			bootstrapapi.BootstrapTokenIDKey:               []byte(id),
			bootstrapapi.BootstrapTokenSecretKey:           []byte(secret),
			bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
			bootstrapapi.BootstrapTokenUsageSigningKey:     []byte("true"),
			bootstrapapi.BootstrapTokenDescriptionKey:      []byte(objectnames.SeedBootstrapTokenDescription(seed)),
			bootstrapapi.BootstrapTokenExpirationKey:       []byte(t.expires.UTC().Format(time.RFC3339)),
		}}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	if _, err := c.secrets.Create(cctx, obj); err != nil {
		return token{}, fmt.Errorf("create a bootstrap token for seed %s: %w", seed, err)
	}
	c.log.Info("created a bootstrap token for the agent of a ManagedSeed", "managedSeed", key, "tokenID", id, "expires", t.expires)
	c.mu.Lock()
	c.tokens[key] = t
	c.mu.Unlock()
	if ok {
		_ = c.deleteToken(ctx, old) // logged; it expires anyway
	}
	return t, nil
}

// dropToken deletes the bootstrap token of the ManagedSeed key on the hub, if it has one.
func (c *Controller) dropToken(ctx context.Context, key string) error {
	c.mu.Lock()
	t, ok := c.tokens[key]
	c.mu.Unlock()
	if !ok {
		return nil
	}
	if err := c.deleteToken(ctx, t); err != nil {
		return err
	}
	c.mu.Lock()
	if c.tokens[key] == t {
		delete(c.tokens, key)
	}
	c.mu.Unlock()
	return nil
}

// deleteToken deletes a token's Secret on the hub; a token that is gone already is no error.
func (c *Controller) deleteToken(ctx context.Context, t token) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	_, err := c.secrets.Delete(ctx, &metav1.DeleteRequest{Namespace: tokenNamespace, Name: bootstrapapi.BootstrapTokenSecretPrefix + t.id})
	if err != nil && status.Code(err) != codes.NotFound {
		c.log.Warn("could not delete a bootstrap token", "tokenID", t.id, "err", err)
		return fmt.Errorf("delete bootstrap token %s: %w", t.id, err)
	}
	return nil
}
