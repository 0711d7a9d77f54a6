package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// User is an authenticated principal.
type User struct {
	Name   string
	Groups []string
	// Seed is the seed named by an agent's client certificate; "" for every other user.
	Seed string
	// CertNotAfter is when the agent's client certificate expires (zero for token users).
	CertNotAfter time.Time
	// CertAuthorityKeyID is the authority key id of the agent's client certificate: which of the hub's CAs issued
	// it (nil for token users).
	CertAuthorityKeyID []byte
	// BootstrapTokenID is the id of the bootstrap token a user authenticated with; "" for every other user.
	BootstrapTokenID string
	// BootstrapTokenDescription is the description of that bootstrap token's Secret (see SeedOfDescription).
	BootstrapTokenDescription string
}

// IsBootstrap reports whether u authenticated with a bootstrap token.
func (u User) IsBootstrap() bool { return u.BootstrapTokenID != "" }

// InGroup reports whether u is a member of group.
func (u User) InGroup(group string) bool { return slices.Contains(u.Groups, group) }

// Well-known principals and groups.
const (
	AdminUser    = "trellis:admin"
	GroupAdmins  = "system:masters"
	GroupAuthned = "system:authenticated"
)

// ErrUnauthenticated is returned for a request without credentials.
var ErrUnauthenticated = errors.New("a valid bearer token or seed client certificate is required")

// Request holds what a request presents to authenticate with.
type Request struct {
	// Token is the bearer token ("" for none).
	Token string
	// VerifiedChains are the client certificate chains the TLS handshake verified against the hub's CA (none when
	// the client sent no certificate).
	VerifiedChains [][]*x509.Certificate
}

// Authenticator identifies the user of a request: seed agents by their client certificates, bootstrap tokens by
// their Secrets in kube-system, users and robot accounts by their AccessTokens, the admin by the admin token's hash
// stored in etcd.
type Authenticator struct {
	mu     sync.RWMutex // guards hashes, which the admin token's rotation changes
	hashes map[[32]byte]User
	admin  *adminTokens // nil in tests that build the authenticator from hashes
	reader ObjectReader // bootstrap token Secrets, AccessTokens, ServiceAccounts; nil rejects those tokens
	now    func() time.Time
}

// Config is what Open needs.
type Config struct {
	// Etcd and Prefix locate the admin token's hash (required).
	Etcd   *clientv3.Client
	Prefix string
	// TokenFile is where a newly generated admin token is written (required).
	TokenFile string
	// InitialToken, when set, is the admin token stored on first start instead of a generated one (and written to
	// TokenFile like one).
	InitialToken string
	// Reader reads bootstrap token Secrets, AccessTokens and their ServiceAccounts from the watch cache (the hub's
	// *api.Registry, built with the index of Indexes). Nil rejects bootstrap tokens and access tokens.
	Reader ObjectReader
	// Now is the clock of expiry checks (default time.Now; tests set it).
	Now func() time.Time
}

func newAuthenticator(hashes map[[32]byte]User, reader ObjectReader, now func() time.Time) *Authenticator {
	if now == nil {
		now = time.Now
	}
	return &Authenticator{hashes: hashes, reader: reader, now: now}
}

// Open ensures the admin token exists: when etcd holds no admin token hash yet, a token is generated (or
// cfg.InitialToken taken), its hash stored (create-if-absent, so concurrent replicas agree) and the token written to
// cfg.TokenFile (mode 0600).
func Open(ctx context.Context, cfg Config) (*Authenticator, error) {
	cli, tokenFile := cfg.Etcd, cfg.TokenFile
	key := cfg.Prefix + "/auth/admin-token-sha256"
	for range 3 {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("read admin token hash: %w", err)
		}
		if len(resp.Kvs) == 1 {
			h, err := decodeHash(key, resp.Kvs[0].Value)
			if err != nil {
				return nil, err
			}
			hashes := map[[32]byte]User{h: adminUser()}
			admin := &adminTokens{cli: cli, key: key, tokenFile: tokenFile}
			next, err := cli.Get(ctx, admin.nextKey())
			if err != nil {
				return nil, fmt.Errorf("read the next admin token hash: %w", err)
			}
			if len(next.Kvs) == 1 { // a rotation runs: the new token is valid too
				nh, err := decodeHash(admin.nextKey(), next.Kvs[0].Value)
				if err != nil {
					return nil, err
				}
				hashes[nh] = adminUser()
			}
			a := newAuthenticator(hashes, cfg.Reader, cfg.Now)
			a.admin = admin
			return a, nil
		}
		token := cfg.InitialToken
		if token == "" {
			var err error
			if token, err = NewToken(); err != nil {
				return nil, err
			}
		}
		h := sha256.Sum256([]byte(token))
		txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, hex.EncodeToString(h[:]))).Commit()
		if err != nil {
			return nil, fmt.Errorf("store admin token hash: %w", err)
		}
		if !txn.Succeeded {
			continue
		}
		if err := writeTokenFile(tokenFile, token); err != nil {
			return nil, fmt.Errorf("write admin token: %w", err)
		}
	}
	return nil, errors.New("could not create or read the admin token")
}

// writeTokenFile writes token to path (mode 0600) through a temporary file renamed into place, so that a reader never
// sees the file empty or half written: a client waiting for the file reads no token or the whole one.
func writeTokenFile(path, token string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(token+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// NewToken returns a random bearer token.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Authenticate returns the user of a request. As kube-apiserver does, the client certificate is tried first and the
// bearer token second: a seed client certificate wins over any token, and a certificate that is not a seed's is
// rejected unless the token authenticates. Errors say why every credential presented failed.
func (a *Authenticator) Authenticate(ctx context.Context, req Request) (User, error) {
	var errs []error
	if len(req.VerifiedChains) > 0 {
		u, err := seedUser(req.VerifiedChains, a.now())
		if err == nil {
			return u, nil
		}
		errs = append(errs, err)
	}
	if req.Token != "" {
		u, err := a.authenticateToken(ctx, req.Token)
		if err == nil {
			return u, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return User{}, ErrUnauthenticated
	}
	return User{}, errors.Join(errs...)
}

func (a *Authenticator) authenticateToken(ctx context.Context, token string) (User, error) {
	if id, secret, ok := ParseBootstrapToken(token); ok {
		return a.authenticateBootstrap(ctx, id, secret)
	}
	if _, ok := ParseAccessToken(token); ok {
		return a.authenticateAccessToken(ctx, token)
	}
	h := sha256.Sum256([]byte(token))
	a.mu.RLock()
	defer a.mu.RUnlock()
	for k, u := range a.hashes {
		if subtle.ConstantTimeCompare(k[:], h[:]) == 1 {
			return u, nil
		}
	}
	return User{}, errInvalidToken
}

// BearerToken extracts the token of an Authorization header value ("Bearer <token>").
func BearerToken(header string) string {
	if len(header) > 7 && strings.EqualFold(header[:7], "bearer ") {
		return strings.TrimSpace(header[7:])
	}
	return ""
}

type userKey struct{}

// WithUser returns ctx carrying u.
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user of ctx.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}
