package credentials_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/trellis-dev/trellis/agent/shoot/credentials"
)

const ns = "shoot--dev--a"

var (
	t0 = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Hour)
	t2 = t0.Add(2 * time.Hour)
)

func newManager(c client.Client) *credentials.Manager {
	return credentials.New(c, ns, rand.Reader, func() time.Time { return t0 })
}

// secretsOf lists the names of the secrets of credential name.
func secretsOf(t *testing.T, c client.Client, name string) []string {
	t.Helper()
	l := &corev1.SecretList{}
	if err := c.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels{credentials.LabelName: name}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range l.Items {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

func certs(t *testing.T, bundle []byte) []string {
	t.Helper()
	var out []string
	for {
		var b *pem.Block
		if b, bundle = pem.Decode(bundle); b == nil {
			return out
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c.Subject.CommonName)
	}
}

func ensure(t *testing.T, m *credentials.Manager, w credentials.Want) *credentials.Set {
	t.Helper()
	set, err := m.Ensure(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestTwoPhaseRotation follows a CA rotation (the service account and etcd keys rotate alike): the current secret is
// the one of the rotation's initiation time, the previous one stays while Preparing and Prepared and goes with
// Completing; repeated Ensures generate nothing new.
func TestTwoPhaseRotation(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	m := newManager(c)
	first := ensure(t, m, credentials.Want{})
	if got := certs(t, first.CABundle); len(got) != 1 || first.CAOld != nil {
		t.Fatalf("CAs before any rotation: %v (old %v)", got, first.CAOld)
	}
	if again := ensure(t, m, credentials.Want{}); string(again.CA.Data["ca.crt"]) != string(first.CA.Data["ca.crt"]) || len(secretsOf(t, c, credentials.NameCA)) != 1 {
		t.Fatal("a second Ensure generated another CA")
	}
	for _, phase := range []string{"Preparing", "Prepared"} {
		set := ensure(t, m, credentials.Want{CA: credentials.Rotation{Phase: phase, Initiated: t1}})
		if got := certs(t, set.CABundle); len(got) != 2 || got[1] != certs(t, first.CABundle)[0] {
			t.Fatalf("%s: CA bundle %v, want the new CA and the old one", phase, got)
		}
		if set.CA.Name != credentials.SecretName(credentials.NameCA, t1) || set.CAOld.Name != first.CA.Name {
			t.Fatalf("%s: current %s, old %s", phase, set.CA.Name, set.CAOld.Name)
		}
		// The client CA rotates with the CA: kube-apiserver trusts client certificates of both meanwhile.
		if got := certs(t, set.CAClientBundle); len(got) != 2 || got[1] != certs(t, first.CAClientBundle)[0] ||
			set.CAClientOld.Name != first.CAClient.Name || !strings.HasPrefix(got[0], "ca-client-") {
			t.Fatalf("%s: client CA bundle %v, want the new client CA and the old one", phase, got)
		}
		if err := m.Cleanup(context.Background(), credentials.Want{CA: credentials.Rotation{Phase: phase, Initiated: t1}}); err != nil {
			t.Fatal(err)
		}
		if n := len(secretsOf(t, c, credentials.NameCA)); n != 2 {
			t.Fatalf("%s: %d CA secrets after the cleanup, want 2", phase, n)
		}
	}
	completing := credentials.Want{CA: credentials.Rotation{Phase: "Completing", Initiated: t1}}
	set := ensure(t, m, completing)
	if got := certs(t, set.CABundle); len(got) != 1 || got[0] == certs(t, first.CABundle)[0] || set.CAOld != nil {
		t.Fatalf("Completing: CA bundle %v, want only the new CA", got)
	}
	if got := certs(t, set.CAClientBundle); len(got) != 1 || got[0] == certs(t, first.CAClientBundle)[0] || set.CAClientOld != nil {
		t.Fatalf("Completing: client CA bundle %v, want only the new client CA", got)
	}
	if err := m.Cleanup(context.Background(), completing); err != nil {
		t.Fatal(err)
	}
	if got := secretsOf(t, c, credentials.NameCA); !slices.Equal(got, []string{credentials.SecretName(credentials.NameCA, t1)}) {
		t.Fatalf("CA secrets after completing: %v", got)
	}
	if keys := ensure(t, m, completing).ETCDEncryptionKeys; len(keys) != 1 {
		t.Fatalf("etcd keys %v, want one", keys)
	}
	prepared := ensure(t, m, credentials.Want{ETCDEncryptionKey: credentials.Rotation{Phase: "Prepared", Initiated: t2}})
	if len(prepared.ETCDEncryptionKeys) != 2 || prepared.ETCDEncryptionKeys[0] == prepared.ETCDEncryptionKeys[1] {
		t.Fatalf("etcd keys while prepared: %v, want two with distinct names (the clock stands still here)", prepared.ETCDEncryptionKeys)
	}
	cfg := &corev1.Secret{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: credentials.NameETCDEncryptionConfig}, cfg); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(cfg.Data["encryption-configuration.yaml"]), "secret: "); n != 2 {
		t.Fatalf("encryption configuration has %d keys, want 2:\n%s", n, cfg.Data["encryption-configuration.yaml"])
	}
}

// TestSSHKeypairRotation: one phase; the previous keypair stays as the old one until the next rotation, and a shoot
// without SSH access has no keypair at all.
func TestSSHKeypairRotation(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	m := newManager(c)
	ctx := context.Background()
	first := ensure(t, m, credentials.Want{SSHKeypair: &credentials.Rotation{}})
	if first.SSHKeypair == nil || first.SSHKeypairOld != nil || !strings.HasPrefix(string(first.SSHKeypair["id_rsa.pub"]), "ssh-rsa ") {
		t.Fatalf("keypair before any rotation: %v, old %v", first.SSHKeypair != nil, first.SSHKeypairOld != nil)
	}
	w1 := credentials.Want{SSHKeypair: &credentials.Rotation{Initiated: t1}}
	second := ensure(t, m, w1)
	if string(second.SSHKeypairOld["id_rsa"]) != string(first.SSHKeypair["id_rsa"]) || string(second.SSHKeypair["id_rsa"]) == string(first.SSHKeypair["id_rsa"]) {
		t.Fatal("the rotated keypair does not keep the previous one as old")
	}
	if err := m.Cleanup(ctx, w1); err != nil {
		t.Fatal(err)
	}
	if n := len(secretsOf(t, c, credentials.NameSSHKeypair)); n != 2 {
		t.Fatalf("%d keypairs after the cleanup, want the new and the old", n)
	}
	w2 := credentials.Want{SSHKeypair: &credentials.Rotation{Initiated: t2}}
	third := ensure(t, m, w2)
	if string(third.SSHKeypairOld["id_rsa"]) != string(second.SSHKeypair["id_rsa"]) {
		t.Fatal("the next rotation's old keypair is not the one it replaced")
	}
	if err := m.Cleanup(ctx, w2); err != nil {
		t.Fatal(err)
	}
	if got := secretsOf(t, c, credentials.NameSSHKeypair); len(got) != 2 || slices.Contains(got, credentials.SecretName(credentials.NameSSHKeypair, time.Time{})) {
		t.Fatalf("keypairs after the second rotation: %v, want the first one gone", got)
	}
	if set := ensure(t, m, credentials.Want{}); set.SSHKeypair != nil {
		t.Fatal("a shoot without SSH access got a keypair")
	}
	if err := m.Cleanup(ctx, credentials.Want{}); err != nil {
		t.Fatal(err)
	}
	if got := secretsOf(t, c, credentials.NameSSHKeypair); len(got) != 0 {
		t.Fatalf("keypairs of a shoot without SSH access: %v", got)
	}
}

// TestExportImport carries the credentials to another seed, as a migration does: the restored shoot keeps its keys.
func TestExportImport(t *testing.T) {
	src, dst := fake.NewClientBuilder().Build(), fake.NewClientBuilder().Build()
	w := credentials.Want{CA: credentials.Rotation{Phase: "Prepared", Initiated: t1}, SSHKeypair: &credentials.Rotation{}}
	ensure(t, newManager(src), credentials.Want{SSHKeypair: &credentials.Rotation{}})
	before := ensure(t, newManager(src), w)
	entries, err := newManager(src).Export(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := newManager(dst).Import(context.Background(), entries); err != nil {
		t.Fatal(err)
	}
	after := ensure(t, newManager(dst), w)
	if string(after.CABundle) != string(before.CABundle) || string(after.ServiceAccountKeyBundle) != string(before.ServiceAccountKeyBundle) ||
		string(after.SSHKeypair["id_rsa"]) != string(before.SSHKeypair["id_rsa"]) || !slices.Equal(after.ETCDEncryptionKeys, before.ETCDEncryptionKeys) {
		t.Fatal("the imported credentials differ from the exported ones")
	}
}

// TestCertificate: a certificate is issued once per configuration and CA, verifies against its CA with its names
// and usages, and a new configuration replaces the earlier one's secret.
func TestCertificate(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	m := newManager(c)
	set := ensure(t, m, credentials.Want{})
	cfg := credentials.CertConfig{Name: "kube-apiserver", CA: set.CA, CommonName: "kube-apiserver",
		DNSNames: []string{"kube-apiserver", "api.a.dev.example.com"}, IPs: []net.IP{net.ParseIP("10.0.0.1")}, Server: true}
	first, err := m.Certificate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := m.Certificate(context.Background(), cfg)
	if err != nil || again.Name != first.Name || string(again.Data["tls.crt"]) != string(first.Data["tls.crt"]) {
		t.Fatalf("a second call issued another certificate (%v)", err)
	}
	b, _ := pem.Decode(first.Data["tls.crt"])
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(set.CABundle)
	for _, name := range []string{"api.a.dev.example.com", "10.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: t0}); err != nil {
			t.Errorf("verify for %s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.example.com", Roots: pool, CurrentTime: t0}); err == nil {
		t.Error("the certificate verifies for a name it was not issued for")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: t0, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("a serving certificate verifies as a client certificate")
	}
	cfg.DNSNames = append(cfg.DNSNames, "kube-apiserver.shoot--dev--a")
	next, err := m.Certificate(context.Background(), cfg)
	if err != nil || next.Name == first.Name {
		t.Fatalf("a new configuration kept secret %s (%v)", next.GetName(), err)
	}
	if got := secretsOf(t, c, "kube-apiserver"); !slices.Equal(got, []string{next.Name}) {
		t.Fatalf("certificate secrets %v, want only %s", got, next.Name)
	}
	if _, err := m.Certificate(context.Background(), credentials.CertConfig{Name: "x", CA: set.CA}); err == nil {
		t.Error("a certificate without server or client usage was issued")
	}
}
