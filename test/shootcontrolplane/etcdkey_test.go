package shootcontrolplane_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/shoot/credentials"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// TestETCDEncryptionKeyRotation: a Secret written before an etcd encryption key rotation is stored under the old
// key; once the rotation is Prepared, etcd holds it under the new key (the agent rewrote it); once Completed, the
// old key is gone from kube-apiserver's configuration and the Secret still reads back, and a new Secret works.
func TestETCDEncryptionKeyRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a seed with a real node and a shoot control plane")
	}
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	e := start(t)
	admin := e.createShoot(t, "local").kubeconfig
	ns := e.shoot(t).GetStatus().GetTechnicalId()
	e.ok(t, admin, "-n", "default", "create", "secret", "generic", "before", "--from-literal=answer=42")
	oldKey := e.secretKey(t, ns, "before")
	if want := e.encryptionKeys(t, ns); len(want) != 1 || want[0] != oldKey {
		t.Fatalf("the secret is encrypted with %q, the configuration has %v", oldKey, want)
	}
	phase := func(s *corev1beta1.Shoot) string {
		return s.GetStatus().GetCredentials().GetRotation().GetEtcdEncryptionKey().GetPhase()
	}

	e.patch(t, `{"metadata":{"annotations":{"gardener.cloud/operation":"rotate-etcd-encryption-key-start"}}}`)
	e.waitShoot(t, "etcd encryption key rotation prepared", 3*time.Minute, func(s *corev1beta1.Shoot) bool {
		return succeeded(s) && phase(s) == "Prepared"
	})
	keys := e.encryptionKeys(t, ns)
	if len(keys) != 2 || keys[1] != oldKey {
		t.Fatalf("while prepared, the configuration has keys %v, want the new one and %s", keys, oldKey)
	}
	newKey := keys[0]
	if got := e.secretKey(t, ns, "before"); got != newKey {
		t.Fatalf("while prepared, the secret written before the rotation is under key %q, want the new key %q", got, newKey)
	}
	if got := e.ok(t, admin, "-n", "default", "get", "secret", "before", "-o", `jsonpath={.metadata.labels.credentials\.gardener\.cloud/key-name}`); got != newKey {
		t.Fatalf("the rewritten secret is labelled %q, want %q", got, newKey)
	}
	if got := e.apiServerAnnotation(t, ns); got != newKey {
		t.Fatalf("while prepared, the kube-apiserver Deployment records the rewrite for %q, want %q", got, newKey)
	}

	e.patch(t, `{"metadata":{"annotations":{"gardener.cloud/operation":"rotate-etcd-encryption-key-complete"}}}`)
	e.waitShoot(t, "etcd encryption key rotation completed", 3*time.Minute, func(s *corev1beta1.Shoot) bool {
		return succeeded(s) && phase(s) == "Completed"
	})
	if keys := e.encryptionKeys(t, ns); len(keys) != 1 || keys[0] != newKey {
		t.Fatalf("after completing, the configuration has keys %v, want only %s", keys, newKey)
	}
	if got := e.ok(t, admin, "-n", "default", "get", "secret", "before", "-o", "jsonpath={.data.answer}"); got != "NDI=" {
		t.Fatalf("after completing, the secret written before the rotation reads %q, want 42 (NDI=)", got)
	}
	if got := e.ok(t, admin, "-n", "default", "get", "secret", "before", "-o", "jsonpath={.metadata.labels}"); strings.Contains(got, "key-name") {
		t.Fatalf("after completing, the secret keeps the rewrite's label: %s", got)
	}
	if got := e.apiServerAnnotation(t, ns); got != "" {
		t.Fatalf("after completing, the kube-apiserver Deployment still records the rewrite: %q", got)
	}
	e.ok(t, admin, "-n", "default", "create", "secret", "generic", "after", "--from-literal=answer=43")
	if got := e.ok(t, admin, "-n", "default", "get", "secret", "after", "-o", "jsonpath={.data.answer}"); got != "NDM=" {
		t.Fatalf("a secret written after the rotation reads %q, want 43 (NDM=)", got)
	}
	if got := e.secretKey(t, ns, "after"); got != newKey {
		t.Fatalf("a secret written after the rotation is under key %q, want %q", got, newKey)
	}
}

// secretKey is the name of the key that encrypts the shoot's Secret default/name in etcd, from the prefix
// kube-apiserver's aescbc provider writes (k8s:enc:aescbc:v1:<key name>:).
func (e *env) secretKey(t *testing.T, ns, name string) string {
	t.Helper()
	cli := e.etcdClient(t, ns, "etcd-main-client")
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, "/registry/secrets/default/"+name)
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("read secret default/%s from etcd: %v (%d values)", name, err, len(r.Kvs))
	}
	const prefix = "k8s:enc:aescbc:v1:"
	v := string(r.Kvs[0].Value)
	if !strings.HasPrefix(v, prefix) {
		t.Fatalf("secret default/%s is not stored encrypted with aescbc: %q", name, v[:min(len(v), 40)])
	}
	key, _, ok := strings.Cut(v[len(prefix):], ":")
	if !ok {
		t.Fatalf("secret default/%s: no key name after %s", name, prefix)
	}
	return key
}

// encryptionKeys are the names of the keys of the shoot's etcd encryption configuration in the seed, in order (the
// first encrypts).
func (e *env) encryptionKeys(t *testing.T, ns string) []string {
	t.Helper()
	s := &corev1.Secret{}
	if err := e.seed.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: credentials.NameETCDEncryptionConfig}, s); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, line := range strings.Split(string(s.Data[credentials.DataKeyEncryptionConfig]), "\n") {
		if k, ok := strings.CutPrefix(strings.TrimSpace(line), "- name: "); ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// apiServerAnnotation is the key the rewrite of the encrypted data was recorded for on the shoot's kube-apiserver
// Deployment (credentials.gardener.cloud/resources-labeled).
func (e *env) apiServerAnnotation(t *testing.T, ns string) string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := e.seed.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "kube-apiserver"}, d); err != nil {
		t.Fatal(err)
	}
	return d.Annotations["credentials.gardener.cloud/resources-labeled"]
}
