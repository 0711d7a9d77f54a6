package auth

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Seed agent identity, as Gardener spells it for gardenlets.
const (
	// SeedsGroup is the only organization of a seed client certificate, and the group its user is in.
	SeedsGroup = "gardener.cloud:system:seeds"
	// SeedUserPrefix followed by the seed name is the common name of a seed client certificate and its user name.
	SeedUserPrefix = "gardener.cloud:system:seed:"
)

// SeedUserName returns the user name of the agent of seed.
func SeedUserName(seed string) string { return SeedUserPrefix + seed }

// seedUser authenticates a verified client certificate chain: the leaf must be valid now and name a seed (O exactly
// [gardener.cloud:system:seeds], CN gardener.cloud:system:seed:<seed>). The handshake checked validity when the
// connection was made; a long-lived connection may outlive the certificate, so it is checked again per request, as
// kube-apiserver does.
func seedUser(chains [][]*x509.Certificate, now time.Time) (User, error) {
	if len(chains[0]) == 0 {
		return User{}, fmt.Errorf("client certificate: empty chain")
	}
	leaf := chains[0][0]
	subject := fmt.Sprintf("O=%q, CN=%q", leaf.Subject.Organization, leaf.Subject.CommonName)
	if now.After(leaf.NotAfter) {
		return User{}, fmt.Errorf("client certificate %s expired at %s", subject, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return User{}, fmt.Errorf("client certificate %s is not valid before %s", subject, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	seed, ok := SeedOfUserName(leaf.Subject.CommonName)
	if !slices.Equal(leaf.Subject.Organization, []string{SeedsGroup}) || !ok {
		return User{}, fmt.Errorf("client certificate %s is not a seed client certificate (O=[%s], CN=%s<seed>)", subject, SeedsGroup, SeedUserPrefix)
	}
	return User{
		Name:               leaf.Subject.CommonName,
		Groups:             []string{SeedsGroup, GroupAuthned},
		Seed:               seed,
		CertNotAfter:       leaf.NotAfter,
		CertAuthorityKeyID: leaf.AuthorityKeyId,
	}, nil
}

// SeedOfUserName returns the seed of a seed agent's user name (or certificate common name) and whether it is one.
func SeedOfUserName(name string) (string, bool) {
	seed, ok := strings.CutPrefix(name, SeedUserPrefix)
	if !ok || len(validation.IsDNS1123Subdomain(seed)) > 0 {
		return "", false
	}
	return seed, true
}
