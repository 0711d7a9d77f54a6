package csr

import (
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/trellis-dev/trellis/hub/auth"
)

// Seed client certificates, as Gardener names them.
const (
	// SignerName is the signer of client certificates for the API.
	SignerName = "kubernetes.io/kube-apiserver-client"
	// BootstrapUserPrefix prefixes the user name of a bootstrap token.
	BootstrapUserPrefix = "system:bootstrap:"
)

// SeedClientUsages are the usages a seed client certificate must request, no more and no less.
var SeedClientUsages = []string{"digital signature", "key encipherment", "client auth"}

// Name is the deterministic name of a seed client CSR: "seed-csr-" plus a digest of public key, common name,
// organization and usages, so a retried request with the same key finds its earlier CSR.
func Name(req *x509.CertificateRequest, usages []string) string {
	h := sha512.New512_256()
	h.Write(req.RawSubjectPublicKeyInfo)
	h.Write([]byte{0})
	h.Write([]byte(req.Subject.CommonName))
	for _, o := range req.Subject.Organization {
		h.Write([]byte{0})
		h.Write([]byte(o))
	}
	u := slices.Clone(usages)
	slices.Sort(u)
	for _, x := range u {
		h.Write([]byte{1})
		h.Write([]byte(x))
	}
	return "seed-csr-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))[:32]
}

// SeedOf checks that req and usages make a seed client certificate request (Gardener's IsSeedClientCert): O exactly
// [gardener.cloud:system:seeds], CN gardener.cloud:system:seed:<seed>, no DNS, email, IP or URI SANs, and exactly the
// usages digital signature, key encipherment and client auth. It returns the seed.
func SeedOf(req *x509.CertificateRequest, usages []string) (string, error) {
	if !slices.Equal(req.Subject.Organization, []string{auth.SeedsGroup}) {
		return "", fmt.Errorf("organization must be exactly [%s], got %v", auth.SeedsGroup, req.Subject.Organization)
	}
	seed, ok := strings.CutPrefix(req.Subject.CommonName, auth.SeedUserPrefix)
	if !ok || seed == "" {
		return "", fmt.Errorf("common name must be %s<seed>, got %q", auth.SeedUserPrefix, req.Subject.CommonName)
	}
	if n := len(req.DNSNames) + len(req.EmailAddresses) + len(req.IPAddresses) + len(req.URIs); n > 0 {
		return "", fmt.Errorf("a seed client certificate has no subject alternative names, the request has %d", n)
	}
	got := slices.Clone(usages)
	slices.Sort(got)
	want := slices.Clone(SeedClientUsages)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return "", fmt.Errorf("usages must be exactly %q, got %q", SeedClientUsages, usages)
	}
	return seed, nil
}

// CheckRequester checks that the requester may ask for a certificate of seed: the seed itself (a rotation), or a
// bootstrap token whose description names the seed.
func CheckRequester(seed, username, tokenDescription string) error {
	if username == auth.SeedUserPrefix+seed {
		return nil
	}
	if id, ok := strings.CutPrefix(username, BootstrapUserPrefix); ok {
		if named := auth.SeedOfDescription(tokenDescription); named != seed {
			if named == "" {
				return fmt.Errorf("bootstrap token %s does not name a seed in its description", id)
			}
			return fmt.Errorf("bootstrap token %s is for seed %q, not %q", id, named, seed)
		}
		return nil
	}
	return fmt.Errorf("user %q may not request a client certificate for seed %q", username, seed)
}
