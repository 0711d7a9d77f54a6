package csr

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/hub/pki"
)

func request(t testing.TB, mutate func(*x509.CertificateRequest)) (*x509.CertificateRequest, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "gardener.cloud:system:seed:local", Organization: []string{"gardener.cloud:system:seeds"}}}
	if mutate != nil {
		mutate(tmpl)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	p := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	r, err := pki.ParseCSR(p)
	if err != nil {
		t.Fatal(err)
	}
	return r, p
}

func TestSeedOf(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*x509.CertificateRequest)
		usages []string
		err    string
	}{
		{name: "valid", usages: SeedClientUsages},
		{name: "usages in another order", usages: []string{"client auth", "key encipherment", "digital signature"}},
		{name: "missing usage", usages: []string{"client auth", "digital signature"}, err: "usages"},
		{name: "extra usage", usages: append([]string{"server auth"}, SeedClientUsages...), err: "usages"},
		{name: "two organizations", usages: SeedClientUsages, err: "organization",
			mutate: func(r *x509.CertificateRequest) {
				r.Subject.Organization = append(r.Subject.Organization, "system:masters")
			}},
		{name: "shoot identity", usages: SeedClientUsages, err: "common name",
			mutate: func(r *x509.CertificateRequest) { r.Subject.CommonName = "gardener.cloud:system:shoot:ns:name" }},
		{name: "empty seed", usages: SeedClientUsages, err: "common name",
			mutate: func(r *x509.CertificateRequest) { r.Subject.CommonName = "gardener.cloud:system:seed:" }},
		{name: "IP SAN", usages: SeedClientUsages, err: "alternative names",
			mutate: func(r *x509.CertificateRequest) { r.IPAddresses = []net.IP{net.IPv4(10, 0, 0, 1)} }},
		{name: "email SAN", usages: SeedClientUsages, err: "alternative names",
			mutate: func(r *x509.CertificateRequest) { r.EmailAddresses = []string{"a@b.c"} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, _ := request(t, c.mutate)
			seed, err := SeedOf(r, c.usages)
			if c.err == "" {
				if err != nil || seed != "local" {
					t.Fatalf("got %q, %v", seed, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("got %v, want an error about %s", err, c.err)
			}
		})
	}
}

func TestCheckRequester(t *testing.T) {
	desc := "A bootstrap token for the trellis-agent of seed local."
	for _, c := range []struct {
		user, desc string
		ok         bool
	}{
		{"gardener.cloud:system:seed:local", "", true},
		{"gardener.cloud:system:seed:other", "", false},
		{"system:bootstrap:abcdef", desc, true},
		{"system:bootstrap:abcdef", "A bootstrap token for the trellis-agent of seed other.", false},
		{"system:bootstrap:abcdef", "some token", false},
		{"trellis:admin", "", false},
	} {
		if err := CheckRequester("local", c.user, c.desc); (err == nil) != c.ok {
			t.Errorf("CheckRequester(local, %q, %q) = %v, want ok=%v", c.user, c.desc, err, c.ok)
		}
	}
}

func TestNameIsDeterministic(t *testing.T) {
	r, _ := request(t, nil)
	if Name(r, SeedClientUsages) != Name(r, []string{"client auth", "key encipherment", "digital signature"}) {
		t.Fatal("the name must not depend on the order of usages")
	}
	r2, _ := request(t, nil)
	if Name(r, SeedClientUsages) == Name(r2, SeedClientUsages) {
		t.Fatal("requests with different keys share a name")
	}
	if n := Name(r, SeedClientUsages); !strings.HasPrefix(n, "seed-csr-") || len(n) > 63 {
		t.Fatalf("name %q", n)
	}
}

// FuzzSeedOfCSR feeds arbitrary bytes through the decoding and checks of an agent's certificate request.
func FuzzSeedOfCSR(f *testing.F) {
	_, good := request(f, nil)
	f.Add(good, "client auth")
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n"), "")
	f.Fuzz(func(t *testing.T, data []byte, usage string) {
		r, err := pki.ParseCSR(data)
		if err != nil {
			return
		}
		seed, err := SeedOf(r, append([]string{usage}, SeedClientUsages...))
		if err == nil && (seed == "" || !strings.HasPrefix(r.Subject.CommonName, "gardener.cloud:system:seed:")) {
			t.Fatalf("accepted %q with common name %q", seed, r.Subject.CommonName)
		}
		_ = Name(r, SeedClientUsages)
	})
}
