package store

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// encPrefix starts every encrypted value; the key's name and a colon follow, then the nonce and the ciphertext.
const encPrefix = "trellis:enc:aesgcm:v1:"

// transformer encrypts values at rest with AES-256-GCM. The etcd key is the additional authenticated data, so a value
// copied to another key does not decrypt.
type transformer struct {
	primary string
	aeads   map[string]cipher.AEAD
}

func newTransformer(keys []Key) (*transformer, error) {
	t := &transformer{aeads: map[string]cipher.AEAD{}}
	for i, k := range keys {
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("store: encryption key %s: %w", k.Name, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("store: encryption key %s: %w", k.Name, err)
		}
		if i == 0 {
			t.primary = k.Name
		}
		t.aeads[k.Name] = aead
	}
	return t, nil
}

func (t *transformer) enabled() bool { return t.primary != "" }

// stale reports whether a stored value is not sealed with the primary key, so it should be rewritten.
func (t *transformer) stale(value []byte) bool {
	return t.enabled() && !bytes.HasPrefix(value, []byte(encPrefix+t.primary+":"))
}

// seal encrypts plain for key with the primary key.
func (t *transformer) seal(key string, plain []byte) ([]byte, error) {
	aead := t.aeads[t.primary]
	if aead == nil {
		return nil, errors.New("no encryption key configured")
	}
	head := len(encPrefix) + len(t.primary) + 1
	out := make([]byte, head+aead.NonceSize(), head+aead.NonceSize()+len(plain)+aead.Overhead())
	copy(out, encPrefix)
	copy(out[len(encPrefix):], t.primary)
	out[head-1] = ':'
	nonce := out[head:]
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(out, nonce, plain, []byte(key)), nil //nolint:gosec // G407: the nonce is fresh from crypto/rand above
}

// open returns the plaintext of a stored value: values without the prefix are plaintext already (written before the
// resource was encrypted), prefixed values are decrypted with the key they name.
func (t *transformer) open(key string, value []byte) ([]byte, error) {
	if !bytes.HasPrefix(value, []byte(encPrefix)) {
		return value, nil
	}
	rest := value[len(encPrefix):]
	i := bytes.IndexByte(rest, ':')
	if i < 0 {
		return nil, errors.New("encrypted value without key name")
	}
	name := string(rest[:i])
	aead := t.aeads[name]
	if aead == nil {
		return nil, fmt.Errorf("value is encrypted with key %q, which is not configured", name)
	}
	rest = rest[i+1:]
	if len(rest) < aead.NonceSize() {
		return nil, errors.New("encrypted value too short")
	}
	plain, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], []byte(key))
	if err != nil {
		return nil, fmt.Errorf("decrypt with key %q: %w", name, err)
	}
	return plain, nil
}
