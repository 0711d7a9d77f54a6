package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// User is an authenticated principal.
type User struct {
	Name   string
	Groups []string
}

// Well-known principals and groups.
const (
	AdminUser    = "trellis:admin"
	GroupAdmins  = "system:masters"
	GroupAuthned = "system:authenticated"
)

// ErrUnauthenticated is returned for a missing or unknown token.
var ErrUnauthenticated = errors.New("a valid bearer token is required")

// Authenticator checks bearer tokens against the hashes stored in etcd.
type Authenticator struct {
	mu     sync.RWMutex
	hashes map[[32]byte]User
}

// Open ensures the admin token exists: when etcd holds no admin token hash yet, a token is generated, its hash stored
// (create-if-absent, so concurrent replicas agree) and the token written to tokenFile (mode 0600).
func Open(ctx context.Context, cli *clientv3.Client, prefix, tokenFile string) (*Authenticator, error) {
	key := prefix + "/auth/admin-token-sha256"
	for range 3 {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("read admin token hash: %w", err)
		}
		if len(resp.Kvs) == 1 {
			var h [32]byte
			if n, err := hex.Decode(h[:], resp.Kvs[0].Value); err != nil || n != 32 {
				return nil, fmt.Errorf("admin token hash at %s is corrupt", key)
			}
			return &Authenticator{hashes: map[[32]byte]User{h: {Name: AdminUser, Groups: []string{GroupAdmins, GroupAuthned}}}}, nil
		}
		token, err := NewToken()
		if err != nil {
			return nil, err
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
		if err := os.MkdirAll(filepath.Dir(tokenFile), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("write admin token: %w", err)
		}
	}
	return nil, errors.New("could not create or read the admin token")
}

// NewToken returns a random bearer token.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Authenticate returns the user of a bearer token.
func (a *Authenticator) Authenticate(token string) (User, error) {
	if token == "" {
		return User{}, ErrUnauthenticated
	}
	h := sha256.Sum256([]byte(token))
	a.mu.RLock()
	defer a.mu.RUnlock()
	for k, u := range a.hashes {
		if subtle.ConstantTimeCompare(k[:], h[:]) == 1 {
			return u, nil
		}
	}
	return User{}, ErrUnauthenticated
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
