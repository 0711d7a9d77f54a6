package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// adminTokens locates the admin token's hashes: the current one at key and, while a rotation runs, the next one at
// key+"-next"; the next token is written to tokenFile+".next" and replaces tokenFile at completion.
type adminTokens struct {
	cli       *clientv3.Client
	key       string
	tokenFile string
}

func (t *adminTokens) nextKey() string { return t.key + "-next" }

func adminUser() User { return User{Name: AdminUser, Groups: []string{GroupAdmins, GroupAuthned}} }

func decodeHash(key string, v []byte) ([32]byte, error) {
	var h [32]byte
	if n, err := hex.Decode(h[:], v); err != nil || n != 32 {
		return h, fmt.Errorf("admin token hash at %s is corrupt", key)
	}
	return h, nil
}

// StartAdminTokenRotation begins the admin token's rotation, the first of its two phases: a new admin token is made,
// written to the token file's path + ".next" (mode 0600) and accepted from now on, beside the old one, which stays
// valid until CompleteAdminTokenRotation. Starting a rotation that runs already keeps its new token (idempotent).
// Other replicas accept the new token from their next start.
func (a *Authenticator) StartAdminTokenRotation(ctx context.Context) error {
	if a.admin == nil {
		return errors.New("admin token rotation: no admin token store")
	}
	token, err := NewToken()
	if err != nil {
		return err
	}
	h := sha256.Sum256([]byte(token))
	txn, err := a.admin.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(a.admin.nextKey()), "=", 0)).
		Then(clientv3.OpPut(a.admin.nextKey(), hex.EncodeToString(h[:]))).Commit()
	if err != nil {
		return fmt.Errorf("store the next admin token hash: %w", err)
	}
	if !txn.Succeeded {
		return nil
	}
	if err := writeTokenFile(a.admin.tokenFile+".next", token); err != nil {
		return fmt.Errorf("write the next admin token: %w", err)
	}
	a.mu.Lock()
	a.hashes[h] = adminUser()
	a.mu.Unlock()
	return nil
}

// CompleteAdminTokenRotation ends the admin token's rotation: the new token becomes the only admin token (the old one
// is refused from now on) and replaces the token file. Without a running rotation it does nothing.
func (a *Authenticator) CompleteAdminTokenRotation(ctx context.Context) error {
	if a.admin == nil {
		return errors.New("admin token rotation: no admin token store")
	}
	resp, err := a.admin.cli.Get(ctx, a.admin.nextKey())
	if err != nil {
		return fmt.Errorf("read the next admin token hash: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	kv := resp.Kvs[0]
	next, err := decodeHash(a.admin.nextKey(), kv.Value)
	if err != nil {
		return err
	}
	if _, err := os.Stat(a.admin.tokenFile + ".next"); err == nil {
		if err := os.Rename(a.admin.tokenFile+".next", a.admin.tokenFile); err != nil {
			return fmt.Errorf("replace the admin token file: %w", err)
		}
	}
	txn, err := a.admin.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(a.admin.nextKey()), "=", kv.ModRevision)).
		Then(clientv3.OpPut(a.admin.key, string(kv.Value)), clientv3.OpDelete(a.admin.nextKey())).Commit()
	if err != nil {
		return fmt.Errorf("store the admin token hash: %w", err)
	}
	if !txn.Succeeded {
		return errors.New("admin token rotation changed concurrently, retry")
	}
	a.mu.Lock()
	for k, u := range a.hashes {
		if u.Name == AdminUser && k != next {
			delete(a.hashes, k)
		}
	}
	a.hashes[next] = adminUser()
	a.mu.Unlock()
	return nil
}
