package agent_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/shoot/credentials"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/agenttest"
)

// pemBlocks returns the DER of the PEM blocks of type typ in b.
func pemBlocks(t *testing.T, b []byte, typ string) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		if blk.Type == typ {
			out = append(out, blk.Bytes)
		}
	}
}

// caSubjects are the common names of the certificates of a PEM bundle, each checked to be a CA.
func caSubjects(t *testing.T, bundle []byte) []string {
	t.Helper()
	var out []string
	for _, der := range pemBlocks(t, bundle, "CERTIFICATE") {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		if !c.IsCA {
			t.Errorf("certificate %s in the CA bundle is no CA", c.Subject.CommonName)
		}
		out = append(out, c.Subject.CommonName)
	}
	return out
}

// gardenSecret reads a secret of the shoots' project namespace from the hub; nil when there is none.
func (e *env) gardenSecret(t *testing.T, name string) *kcorev1.Secret {
	t.Helper()
	o, err := e.hub.Collection(t, "", "secrets").Get(context.Background(), flowNamespace, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.(*kcorev1.Secret)
}

func (e *env) gardenConfigMap(t *testing.T, name string) *kcorev1.ConfigMap {
	t.Helper()
	o, err := e.hub.Collection(t, "", "configmaps").Get(context.Background(), flowNamespace, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.(*kcorev1.ConfigMap)
}

// annotateShoot sets gardener.cloud/operation through the hub's REST API, as trellisctl does, and returns the status
// code, the response and the shoot's generation afterwards.
func (e *env) annotateShoot(t *testing.T, name, op string) (int, string) {
	t.Helper()
	code, out := e.hub.Do(t, "PATCH", "/apis/core.gardener.cloud/v1beta1/namespaces/"+flowNamespace+"/shoots/"+name,
		fmt.Sprintf(`{"metadata":{"annotations":{"gardener.cloud/operation":%q}}}`, op), "Content-Type", "application/merge-patch+json")
	return code, string(out)
}

// phases are the shoot's CA, service account key and etcd encryption key rotation phases.
func phases(s *corev1beta1.Shoot) []string {
	r := s.GetStatus().GetCredentials().GetRotation()
	return []string{r.GetCertificateAuthorities().GetPhase(), r.GetServiceAccountKey().GetPhase(), r.GetEtcdEncryptionKey().GetPhase()}
}

// seedSecretData is the data of the seed secrets of the shoot's credentials, by name.
func seedSecretData(t *testing.T, seed client.Client, ns string) map[string]string {
	t.Helper()
	l := &corev1.SecretList{}
	if err := seed.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels{credentials.LabelManagedBy: "secrets-manager"}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range l.Items {
		keys := make([]string, 0, len(s.Data))
		for k := range s.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%s;", k, s.Data[k])
		}
		out[s.Name] = b.String()
	}
	return out
}

func seedSecret(t *testing.T, seed client.Client, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := seed.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestShootCredentialsRotation rotates a shoot's credentials with Gardener's annotations against a real hub and seed:
// start makes new credentials next to the old ones (both CAs in <shoot>.ca-cluster, both service account keys in the
// bundle, both etcd keys configured, the previous SSH keypair in <shoot>.ssh-keypair.old), a second start while
// Prepared is refused by the hub, an agent restarted in between keeps the keys, complete drops the old CA, service
// account key and etcd key, and deleting the shoot deletes what was published in the project namespace.
func TestShootCredentialsRotation(t *testing.T) {
	e := newEnv(t)
	e.hub.Store(t, flowFixtures()...)
	e.hub.Store(t, agentsim.Secret(flowNamespace, "rot"), agentsim.SecretBinding(flowNamespace, "rot"))
	s := flowShoot("rot")
	s.Spec.SeedName = nil
	e.createShoot(t, s)
	cfg := e.shootConfig(t)
	ta := agenttest.StartAgent(t, cfg)
	agenttest.Eventually(t, "the agent installed the CRDs", func() bool { return ta.Status().CRDsInstalled })
	startStubExtension(t, e)
	seed, err := client.New(e.seed.Config, client.Options{Scheme: agent.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := "shoot--dev--rot"
	succeeded := func(what string, cond func(*corev1beta1.Shoot) bool) *corev1beta1.Shoot {
		t.Helper()
		var got *corev1beta1.Shoot
		agenttest.Eventually(t, what, func() bool {
			got = e.shoot(t, "rot")
			return got.GetStatus().GetLastOperation().GetState() == "Succeeded" &&
				got.GetStatus().GetObservedGeneration() == got.GetMetadata().GetGeneration() &&
				got.GetMetadata().GetAnnotations()["gardener.cloud/operation"] == "" && cond(got)
		})
		return got
	}
	s = succeeded("the shoot is created", func(*corev1beta1.Shoot) bool { return true })

	// Created: one CA, published as Secret and ConfigMap; an SSH keypair and no old one.
	ca := e.gardenSecret(t, "rot.ca-cluster")
	if ca == nil || len(caSubjects(t, ca.GetData()["ca.crt"])) != 1 {
		t.Fatalf("rot.ca-cluster after create: %v", ca)
	}
	firstCA := caSubjects(t, ca.GetData()["ca.crt"])[0]
	if ca.GetMetadata().GetLabels()["gardener.cloud/role"] != "ca-cluster" || len(ca.GetMetadata().GetOwnerReferences()) != 1 ||
		ca.GetMetadata().GetOwnerReferences()[0].GetKind() != "Shoot" || ca.GetMetadata().GetOwnerReferences()[0].GetUid() != s.GetMetadata().GetUid() {
		t.Errorf("rot.ca-cluster metadata: %v", ca.GetMetadata())
	}
	cm := e.gardenConfigMap(t, "rot.ca-cluster")
	if cm == nil || cm.GetData()["ca.crt"] != string(ca.GetData()["ca.crt"]) || cm.GetMetadata().GetLabels()["discovery.gardener.cloud/public"] != "shoot-ca" {
		t.Fatalf("config map rot.ca-cluster after create: %v", cm)
	}
	keypair := e.gardenSecret(t, "rot.ssh-keypair")
	if keypair == nil || len(keypair.GetData()["id_rsa"]) == 0 || !bytes.HasPrefix(keypair.GetData()["id_rsa.pub"], []byte("ssh-rsa ")) ||
		keypair.GetMetadata().GetLabels()["gardener.cloud/role"] != "ssh-keypair" {
		t.Fatalf("rot.ssh-keypair after create: %v", keypair)
	}
	if old := e.gardenSecret(t, "rot.ssh-keypair.old"); old != nil {
		t.Fatalf("rot.ssh-keypair.old exists before any rotation")
	}
	if n := len(pemBlocks(t, seedSecret(t, seed, ns, credentials.NameServiceAccountKeyBundle).Data["bundle.key"], "PUBLIC KEY")); n != 1 {
		t.Fatalf("service account key bundle has %d keys after create, want 1", n)
	}

	// Start: the hub moves the generation; the agent prepares the rotation.
	gen := s.GetMetadata().GetGeneration()
	if code, out := e.annotateShoot(t, "rot", "rotate-credentials-start"); code != 200 {
		t.Fatalf("annotate rotate-credentials-start: %d %s", code, out)
	}
	if g := e.shoot(t, "rot").GetMetadata().GetGeneration(); g != gen+1 {
		t.Fatalf("generation %d after the rotation was asked for, want %d", g, gen+1)
	}
	s = succeeded("the rotation is prepared", func(s *corev1beta1.Shoot) bool {
		return slices.Equal(phases(s), []string{"Prepared", "Prepared", "Prepared"})
	})
	rot := s.GetStatus().GetCredentials().GetRotation()
	if rot.GetCertificateAuthorities().GetLastInitiationTime() == nil || rot.GetCertificateAuthorities().GetLastInitiationFinishedTime() == nil ||
		rot.GetSshKeypair().GetLastInitiationTime() == nil || rot.GetSshKeypair().GetLastCompletionTime() == nil ||
		rot.GetObservability().GetLastCompletionTime() == nil {
		t.Errorf("rotation status after start: %v", rot)
	}
	ca = e.gardenSecret(t, "rot.ca-cluster")
	cas := caSubjects(t, ca.GetData()["ca.crt"])
	if len(cas) != 2 || !slices.Contains(cas, firstCA) {
		t.Fatalf("CAs in rot.ca-cluster while prepared: %v, want a new one and %s", cas, firstCA)
	}
	newCA := cas[0]
	if newCA == firstCA {
		newCA = cas[1]
	}
	if cm = e.gardenConfigMap(t, "rot.ca-cluster"); cm.GetData()["ca.crt"] != string(ca.GetData()["ca.crt"]) {
		t.Errorf("config map and secret rot.ca-cluster differ")
	}
	old := e.gardenSecret(t, "rot.ssh-keypair.old")
	if old == nil || !bytes.Equal(old.GetData()["id_rsa"], keypair.GetData()["id_rsa"]) {
		t.Fatalf("rot.ssh-keypair.old is not the keypair before the rotation")
	}
	newKeypair := e.gardenSecret(t, "rot.ssh-keypair")
	if bytes.Equal(newKeypair.GetData()["id_rsa"], keypair.GetData()["id_rsa"]) {
		t.Fatalf("rot.ssh-keypair was not rotated")
	}
	if n := len(pemBlocks(t, seedSecret(t, seed, ns, credentials.NameServiceAccountKeyBundle).Data["bundle.key"], "PUBLIC KEY")); n != 2 {
		t.Fatalf("service account key bundle has %d keys while prepared, want 2", n)
	}
	if n := strings.Count(string(seedSecret(t, seed, ns, credentials.NameETCDEncryptionConfig).Data["encryption-configuration.yaml"]), "- name: key"); n != 2 {
		t.Fatalf("etcd encryption configuration has %d keys while prepared, want 2", n)
	}

	// A second start while Prepared is refused, naming the annotation.
	code, out := e.annotateShoot(t, "rot", "rotate-credentials-start")
	if code != 422 || !strings.Contains(out, "metadata.annotations[gardener.cloud/operation]") ||
		!strings.Contains(out, "cannot start rotation of all credentials if .status.credentials.rotation.certificateAuthorities.phase is not 'Completed'") {
		t.Fatalf("second rotate-credentials-start while Prepared: %d %s, want 422 naming the annotation", code, out)
	}

	// A restarted agent keeps the keys: a reconcile by the new agent leaves every credential's secret as it was.
	prepared := seedSecretData(t, seed, ns)
	ta.Stop()
	ta = agenttest.StartAgent(t, cfg)
	if code, out := e.annotateShoot(t, "rot", "reconcile"); code != 200 {
		t.Fatalf("annotate reconcile: %d %s", code, out)
	}
	agenttest.Eventually(t, "the new agent takes the reconcile up", func() bool {
		return e.shoot(t, "rot").GetMetadata().GetAnnotations()["gardener.cloud/operation"] == ""
	})
	succeeded("the new agent reconciled", func(*corev1beta1.Shoot) bool { return true })
	if after := seedSecretData(t, seed, ns); !maps.Equal(after, prepared) {
		t.Fatalf("credentials changed across the restart:\nbefore %v\nafter  %v", keys(prepared), keys(after))
	}

	// Complete: the old CA, service account key and etcd key go.
	if code, out := e.annotateShoot(t, "rot", "rotate-credentials-complete"); code != 200 {
		t.Fatalf("annotate rotate-credentials-complete: %d %s", code, out)
	}
	s = succeeded("the rotation is completed", func(s *corev1beta1.Shoot) bool {
		return slices.Equal(phases(s), []string{"Completed", "Completed", "Completed"})
	})
	if r := s.GetStatus().GetCredentials().GetRotation().GetCertificateAuthorities(); r.GetLastCompletionTime() == nil ||
		r.GetLastInitiationFinishedTime() != nil || r.GetLastCompletionTriggeredTime() != nil {
		t.Errorf("CA rotation after complete: %v", r)
	}
	if cas := caSubjects(t, e.gardenSecret(t, "rot.ca-cluster").GetData()["ca.crt"]); !slices.Equal(cas, []string{newCA}) {
		t.Fatalf("CAs in rot.ca-cluster after complete: %v, want only the new %s", cas, newCA)
	}
	if cas := caSubjects(t, []byte(e.gardenConfigMap(t, "rot.ca-cluster").GetData()["ca.crt"])); !slices.Equal(cas, []string{newCA}) {
		t.Fatalf("CAs in config map rot.ca-cluster after complete: %v, want only %s", cas, newCA)
	}
	if n := len(pemBlocks(t, seedSecret(t, seed, ns, credentials.NameServiceAccountKeyBundle).Data["bundle.key"], "PUBLIC KEY")); n != 1 {
		t.Fatalf("service account key bundle has %d keys after complete, want 1", n)
	}
	if n := strings.Count(string(seedSecret(t, seed, ns, credentials.NameETCDEncryptionConfig).Data["encryption-configuration.yaml"]), "- name: key"); n != 1 {
		t.Fatalf("etcd encryption configuration has %d keys after complete, want 1", n)
	}
	for _, name := range []string{credentials.NameCA, credentials.NameServiceAccountKey, credentials.NameETCDEncryptionKey} {
		l := &corev1.SecretList{}
		if err := seed.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels{credentials.LabelName: name}); err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 1 {
			t.Errorf("%d %s secrets in the seed after complete, want 1", len(l.Items), name)
		}
	}
	// The SSH keypair's rotation has one phase (Gardener's rotate-ssh-keypair): the previous keypair stays valid as
	// .old until the next rotation; complete does not touch it.
	if old := e.gardenSecret(t, "rot.ssh-keypair.old"); old == nil || !bytes.Equal(old.GetData()["id_rsa"], keypair.GetData()["id_rsa"]) {
		t.Errorf("rot.ssh-keypair.old after complete is not the keypair before the rotation")
	}
	if k := e.gardenSecret(t, "rot.ssh-keypair"); !bytes.Equal(k.GetData()["id_rsa"], newKeypair.GetData()["id_rsa"]) {
		t.Errorf("rot.ssh-keypair changed on complete")
	}

	// Delete: what was published in the project namespace goes with the shoot.
	if _, _, err := e.hub.Collection(t, "core.gardener.cloud", "shoots").Delete(context.Background(), flowNamespace, "rot", nil); err != nil {
		t.Fatal(err)
	}
	agenttest.Eventually(t, "the shoot is gone", func() bool { return e.shoot(t, "rot") == nil })
	for _, name := range []string{"rot.ca-cluster", "rot.ssh-keypair", "rot.ssh-keypair.old"} {
		if e.gardenSecret(t, name) != nil {
			t.Errorf("secret %s/%s remains after the shoot was deleted", flowNamespace, name)
		}
	}
	if e.gardenConfigMap(t, "rot.ca-cluster") != nil {
		t.Errorf("config map %s/rot.ca-cluster remains after the shoot was deleted", flowNamespace)
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
