package store

// Seal encrypts a value kept in etcd outside the collections (such as the CA's private key) with the store's
// encryption keys; key is the etcd key, bound to the ciphertext so a value moved elsewhere does not decrypt.
func (s *Store) Seal(key string, plain []byte) ([]byte, error) { return s.enc.seal(key, plain) }

// Open decrypts a value written by Seal (plaintext values are returned as they are).
func (s *Store) Open(key string, stored []byte) ([]byte, error) { return s.enc.open(key, stored) }

// Prefix is the key prefix of everything the hub keeps in etcd.
func (s *Store) Prefix() string { return s.cfg.Prefix }
