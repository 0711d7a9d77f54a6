package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/store"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
)

var testNow = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

const adminToken = "admin-token-for-tests"

func newTestAuthenticator(reader ObjectReader) *Authenticator {
	return newAuthenticator(map[[32]byte]User{sha256.Sum256([]byte(adminToken)): {Name: AdminUser, Groups: []string{GroupAdmins, GroupAuthned}}},
		reader, func() time.Time { return testNow })
}

// secrets is an ObjectReader holding Secrets, standing in for the hub's watch cache (the hub tests read the real one).
type secrets map[string]*kcorev1.Secret

func (s secrets) Get(_ context.Context, gr schema.GroupResource, namespace, name string) (store.Object, error) {
	if gr != secretsResource {
		return nil, apierrors.NewNotFound(gr, name)
	}
	if sec, ok := s[namespace+"/"+name]; ok {
		return sec, nil
	}
	return nil, apierrors.NewNotFound(gr, name)
}

// ByIndex finds no AccessTokens: these tests are about bootstrap tokens (the hub tests read the real cache).
func (s secrets) ByIndex(context.Context, schema.GroupResource, string, string) ([]store.Object, error) {
	return nil, nil
}

// laggingSecrets stands in for the watch cache of a replica that has not yet seen Secrets another replica wrote:
// they appear once Sync has been called.
type laggingSecrets struct {
	secrets
	unseen secrets
	synced bool
}

func (l *laggingSecrets) Get(ctx context.Context, gr schema.GroupResource, namespace, name string) (store.Object, error) {
	if l.synced {
		if sec, ok := l.unseen[namespace+"/"+name]; ok {
			return sec, nil
		}
	}
	return l.secrets.Get(ctx, gr, namespace, name)
}

func (l *laggingSecrets) Sync(context.Context, schema.GroupResource) error {
	l.synced = true
	return nil
}

// TestBootstrapTokenOfAnotherReplica: a token whose Secret this replica's cache has not seen yet (it was created
// through another replica a moment ago) is accepted after the cache caught up with etcd.
func TestBootstrapTokenOfAnotherReplica(t *testing.T) {
	const id, secret = "abcdef", "0123456789abcdef"
	r := &laggingSecrets{secrets: secrets{}, unseen: secrets{"kube-system/bootstrap-token-abcdef": bootstrapSecret(id, secret, nil)}}
	u, err := newTestAuthenticator(r).Authenticate(context.Background(), Request{Token: id + "." + secret})
	if err != nil {
		t.Fatal(err)
	}
	if !r.synced || u.BootstrapTokenID != id {
		t.Fatalf("user %+v (synced %v), want the bootstrap token's", u, r.synced)
	}
	if _, err := newTestAuthenticator(r).Authenticate(context.Background(), Request{Token: "zyxwvu." + secret}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("unknown token: %v, want not found", err)
	}
}

// issuer is a CA for client certificates.
type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: testNow.Add(-24 * time.Hour), NotAfter: testNow.Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &issuer{cert: cert, key: key, pool: pool}
}

// chains issues a client certificate for subject valid from notBefore to notAfter and verifies it as the TLS
// handshake would (at a time it is valid), returning the verified chains.
func (ca *issuer) chains(t *testing.T, subject pkix.Name, notBefore, notAfter time.Time) [][]*x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject, NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	chains, err := cert.Verify(x509.VerifyOptions{Roots: ca.pool, CurrentTime: notBefore.Add(time.Minute), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	return chains
}

func TestSeedCertificate(t *testing.T) {
	ca := newIssuer(t)
	valid := func(o []string, cn string) [][]*x509.Certificate {
		return ca.chains(t, pkix.Name{Organization: o, CommonName: cn}, testNow.Add(-time.Hour), testNow.Add(time.Hour))
	}
	a := newTestAuthenticator(nil)
	ctx := context.Background()

	u, err := a.Authenticate(ctx, Request{VerifiedChains: valid([]string{SeedsGroup}, "gardener.cloud:system:seed:aws-1")})
	if err != nil {
		t.Fatal(err)
	}
	if u.Name != "gardener.cloud:system:seed:aws-1" || u.Seed != "aws-1" || !slices.Equal(u.Groups, []string{SeedsGroup, GroupAuthned}) ||
		!u.CertNotAfter.Equal(testNow.Add(time.Hour)) || u.IsBootstrap() {
		t.Errorf("seed user: got %+v", u)
	}

	// A seed certificate wins over a token, as x509 comes first in Kubernetes.
	u, err = a.Authenticate(ctx, Request{Token: adminToken, VerifiedChains: valid([]string{SeedsGroup}, "gardener.cloud:system:seed:aws-1")})
	if err != nil || u.Seed != "aws-1" {
		t.Errorf("certificate and token: want the seed user, got %+v, %v", u, err)
	}

	for _, tc := range []struct {
		name   string
		chains [][]*x509.Certificate
		want   string
	}{
		{"wrong O", valid([]string{"system:masters"}, "gardener.cloud:system:seed:aws-1"), "is not a seed client certificate"},
		{"extra O", valid([]string{SeedsGroup, "system:masters"}, "gardener.cloud:system:seed:aws-1"), "is not a seed client certificate"},
		{"no O", valid(nil, "gardener.cloud:system:seed:aws-1"), "is not a seed client certificate"},
		{"wrong CN prefix", valid([]string{SeedsGroup}, "gardener.cloud:system:shoot:garden-dev:s"), "is not a seed client certificate"},
		{"CN without seed", valid([]string{SeedsGroup}, "gardener.cloud:system:seed:"), "is not a seed client certificate"},
		{"CN with an invalid seed name", valid([]string{SeedsGroup}, "gardener.cloud:system:seed:Not_A_Name"), "is not a seed client certificate"},
		{"expired", ca.chains(t, pkix.Name{Organization: []string{SeedsGroup}, CommonName: "gardener.cloud:system:seed:aws-1"}, testNow.Add(-2*time.Hour), testNow.Add(-time.Hour)), "expired at 2026-08-01T11:00:00Z"},
		{"not yet valid", ca.chains(t, pkix.Name{Organization: []string{SeedsGroup}, CommonName: "gardener.cloud:system:seed:aws-1"}, testNow.Add(time.Hour), testNow.Add(2*time.Hour)), "not valid before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := a.Authenticate(ctx, Request{VerifiedChains: tc.chains})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %+v, %v", tc.want, u, err)
			}
			// A token still authenticates next to a certificate that does not.
			u, err = a.Authenticate(ctx, Request{Token: adminToken, VerifiedChains: tc.chains})
			if err != nil || u.Name != AdminUser || u.Seed != "" {
				t.Errorf("with the admin token: want the admin, got %+v, %v", u, err)
			}
			// A wrong token next to it: both failures are told.
			_, err = a.Authenticate(ctx, Request{Token: "nope", VerifiedChains: tc.chains})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "invalid bearer token") {
				t.Errorf("with a wrong token: want both reasons, got %v", err)
			}
		})
	}

	if _, err := a.Authenticate(ctx, Request{}); err != ErrUnauthenticated {
		t.Errorf("no credentials: want ErrUnauthenticated, got %v", err)
	}
}

func bootstrapSecret(id, secret string, mutate func(s *kcorev1.Secret)) *kcorev1.Secret {
	tok := BootstrapToken{ID: id, Secret: secret, Description: "A bootstrap token for the trellis-agent of seed aws-1.", Expiration: testNow.Add(time.Hour)}
	s := tok.SecretObject()
	if mutate != nil {
		mutate(s)
	}
	return s
}

func TestBootstrapToken(t *testing.T) {
	const id, secret = "abcdef", "0123456789abcdef"
	token := id + "." + secret
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		token  string
		secret *kcorev1.Secret // stored as kube-system/bootstrap-token-abcdef
		want   string          // error substring; "" for success
	}{
		{name: "valid", token: token, secret: bootstrapSecret(id, secret, nil)},
		{name: "no expiration", token: token, secret: bootstrapSecret(id, secret, func(s *kcorev1.Secret) { delete(s.Data, "expiration") })},
		{name: "wrong secret", token: id + ".fedcba9876543210", secret: bootstrapSecret(id, secret, nil), want: "bootstrap token abcdef: the secret does not match"},
		{name: "expired", token: token, secret: bootstrapSecret(id, secret, func(s *kcorev1.Secret) {
			s.Data["expiration"] = []byte(testNow.Add(-time.Minute).Format(time.RFC3339))
		}), want: "bootstrap token abcdef expired at 2026-08-01T11:59:00Z"},
		{name: "expires now", token: token, secret: bootstrapSecret(id, secret, func(s *kcorev1.Secret) {
			s.Data["expiration"] = []byte(testNow.Format(time.RFC3339))
		}), want: "expired at"},
		{name: "unparsable expiration", token: token, secret: bootstrapSecret(id, secret, func(s *kcorev1.Secret) { s.Data["expiration"] = []byte("tomorrow") }), want: "invalid expiration"},
		{name: "missing usage", token: token, secret: bootstrapSecret(id, secret, func(s *kcorev1.Secret) { delete(s.Data, "usage-bootstrap-authentication") }), want: "may not be used for authentication"},
		{name: "usage not true", token: token, secret: bootstrapSecret(id, secret, func(s *kcorev1.Secret) { s.Data["usage-bootstrap-authentication"] = []byte("yes") }), want: "may not be used for authentication"},
		{name: "wrong type", token: token, secret: bootstrapSecret(id, secret, func(s *kcorev1.Secret) { s.Type = "Opaque" }), want: "is not of type bootstrap.kubernetes.io/token"},
		{name: "token-id differs", token: token, secret: bootstrapSecret(id, secret, func(s *kcorev1.Secret) { s.Data["token-id"] = []byte("zzzzzz") }), want: `has token-id "zzzzzz"`},
		{name: "being deleted", token: token, secret: bootstrapSecret(id, secret, func(s *kcorev1.Secret) { s.Metadata.DeletionTimestamp = timestamppb.New(testNow) }), want: "is being deleted"},
		{name: "invalid extra group", token: token, secret: bootstrapSecret(id, secret, func(s *kcorev1.Secret) { s.Data["auth-extra-groups"] = []byte("system:masters") }), want: "auth-extra-groups"},
		{name: "no secret", token: "zyxwvu." + secret, secret: bootstrapSecret(id, secret, nil), want: "secret kube-system/bootstrap-token-zyxwvu not found"},
		{name: "malformed: upper case", token: "ABCDEF." + secret, secret: bootstrapSecret(id, secret, nil), want: "invalid bearer token"},
		{name: "malformed: short secret", token: id + ".0123", secret: bootstrapSecret(id, secret, nil), want: "invalid bearer token"},
		{name: "malformed: no dot", token: id + secret, secret: bootstrapSecret(id, secret, nil), want: "invalid bearer token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAuthenticator(secrets{"kube-system/bootstrap-token-" + id: tc.secret})
			u, err := a.Authenticate(ctx, Request{Token: tc.token})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("want an error containing %q, got %+v, %v", tc.want, u, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.Name != "system:bootstrap:abcdef" || !slices.Equal(u.Groups, []string{"system:bootstrappers", GroupAuthned}) ||
				u.BootstrapTokenID != id || u.BootstrapTokenDescription != "A bootstrap token for the trellis-agent of seed aws-1." ||
				!u.IsBootstrap() || u.Seed != "" {
				t.Errorf("got %+v", u)
			}
		})
	}

	t.Run("extra groups", func(t *testing.T) {
		a := newTestAuthenticator(secrets{"kube-system/bootstrap-token-" + id: bootstrapSecret(id, secret, func(s *kcorev1.Secret) {
			s.Data["auth-extra-groups"] = []byte("system:bootstrappers:trellis:seeds, system:bootstrappers:x")
		})})
		u, err := a.Authenticate(ctx, Request{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"system:bootstrappers", GroupAuthned, "system:bootstrappers:trellis:seeds", "system:bootstrappers:x"}; !slices.Equal(u.Groups, want) {
			t.Errorf("groups: want %q, got %q", want, u.Groups)
		}
	})

	t.Run("no reader yet", func(t *testing.T) {
		a := newTestAuthenticator(nil)
		if _, err := a.Authenticate(ctx, Request{Token: token}); err == nil || !strings.Contains(err.Error(), "not accepted yet") {
			t.Errorf("want not accepted yet, got %v", err)
		}
	})

	t.Run("admin token is unaffected", func(t *testing.T) {
		a := newTestAuthenticator(secrets{})
		if u, err := a.Authenticate(ctx, Request{Token: adminToken}); err != nil || u.Name != AdminUser {
			t.Errorf("want the admin, got %+v, %v", u, err)
		}
	})
}

func TestNewSeedBootstrapToken(t *testing.T) {
	exp := testNow.Add(30 * time.Minute)
	tok, err := NewSeedBootstrapToken("aws-1", exp)
	if err != nil {
		t.Fatal(err)
	}
	id, secret, ok := ParseBootstrapToken(tok.Token())
	if !ok || id != tok.ID || secret != tok.Secret {
		t.Fatalf("token %q does not parse as a bootstrap token", tok.Token())
	}
	other, _ := NewSeedBootstrapToken("aws-1", exp)
	if other.ID == tok.ID && other.Secret == tok.Secret {
		t.Error("two tokens are the same")
	}
	s := tok.SecretObject()
	if s.GetMetadata().GetNamespace() != "kube-system" || s.GetMetadata().GetName() != "bootstrap-token-"+tok.ID || s.GetType() != "bootstrap.kubernetes.io/token" {
		t.Errorf("secret: %v", s)
	}
	if got := string(s.GetData()["expiration"]); got != "2026-08-01T12:30:00Z" {
		t.Errorf("expiration: %q", got)
	}
	if got := SeedOfDescription(string(s.GetData()["description"])); got != "aws-1" {
		t.Errorf("SeedOfDescription(%q) = %q", s.GetData()["description"], got)
	}

	a := newTestAuthenticator(secrets{"kube-system/" + s.GetMetadata().GetName(): s})
	u, err := a.Authenticate(context.Background(), Request{Token: tok.Token()})
	if err != nil {
		t.Fatal(err)
	}
	if SeedOfDescription(u.BootstrapTokenDescription) != "aws-1" || u.BootstrapTokenID != tok.ID {
		t.Errorf("user: %+v", u)
	}
	a.now = func() time.Time { return exp }
	if _, err := a.Authenticate(context.Background(), Request{Token: tok.Token()}); err == nil || !strings.Contains(err.Error(), "expired at 2026-08-01T12:30:00Z") {
		t.Errorf("at its expiration: want expired, got %v", err)
	}
}

func TestSeedOfDescription(t *testing.T) {
	for desc, want := range map[string]string{
		"A bootstrap token for the trellis-agent of seed aws-1.": "aws-1",
		"A bootstrap token for the trellis-agent of seed aws-1":  "",
		"A bootstrap token for the trellis-agent of seed .":      "",
		"A bootstrap token for the trellis-agent of seed a b.":   "",
		"A bootstrap token for the Gardenlet for seed aws-1.":    "",
		"": "",
		"A bootstrap token for the trellis-agent of seed x.y.z.": "x.y.z",
	} {
		if got := SeedOfDescription(desc); got != want {
			t.Errorf("SeedOfDescription(%q) = %q, want %q", desc, got, want)
		}
	}
}
