package shoot

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"

	"github.com/trellis-dev/trellis/test/seedtest"
)

func TestMain(m *testing.M) { seedtest.Main(m) }

// TestRewriteEncryptedPagesAndResumes runs the etcd key rotation's rewrite against a real kube-apiserver: pages
// smaller than the objects still reach every one, objects a previous, interrupted run labelled are not written again,
// a second run writes nothing, and the completion's run takes every label off.
func TestRewriteEncryptedPagesAndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	seed := seedtest.StartShared(t)
	ctx := context.Background()
	ns := seed.Namespace(t)
	secrets := seed.Client.CoreV1().Secrets(ns)
	const total, donePreviously = 7, 3
	for i := range total {
		s := &corev1.Secret{ObjectMeta: kmetav1.ObjectMeta{Name: fmt.Sprintf("s%d", i)}, StringData: map[string]string{"v": "x"}}
		if i < donePreviously {
			// What a run that stopped after its first patches left behind.
			s.Labels = map[string]string{labelEncryptionKeyName: "key2"}
		}
		if _, err := secrets.Create(ctx, s, kmetav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// An object labelled with the previous rotation's key is rewritten again.
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: kmetav1.ObjectMeta{Name: "older", Labels: map[string]string{labelEncryptionKeyName: "key1"}}},
		kmetav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	versions := func() map[string]string {
		t.Helper()
		l, err := secrets.List(ctx, kmetav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range l.Items {
			out[s.Name] = s.ResourceVersion + "/" + s.Labels[labelEncryptionKeyName]
		}
		return out
	}
	before := versions()
	mc, err := metadata.NewForConfig(seed.Config)
	if err != nil {
		t.Fatal(err)
	}
	add := func() int {
		t.Helper()
		n, err := rewriteEncrypted(ctx, mc, encryptedResources(), labelEncryptionKeyName+"!=key2", map[string]any{labelEncryptionKeyName: "key2"}, 2)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := add(); n < total-donePreviously+1 {
		t.Fatalf("the rewrite patched %d objects, want at least the %d of the namespace not done yet", n, total-donePreviously+1)
	}
	after := versions()
	for name, v := range after {
		done := false
		for i := range donePreviously {
			done = done || name == fmt.Sprintf("s%d", i)
		}
		switch {
		case done && v != before[name]:
			t.Errorf("%s was labelled before the run and was written again: %s, was %s", name, v, before[name])
		case !done && (v == before[name] || !strings.HasSuffix(v, "/key2")):
			t.Errorf("%s was not rewritten with key2: %s, was %s", name, v, before[name])
		}
	}
	if n := add(); n != 0 {
		t.Fatalf("a second run patched %d objects, want 0", n)
	}
	if again := versions(); fmt.Sprint(again) != fmt.Sprint(after) {
		t.Fatalf("a second run changed objects: %v, was %v", again, after)
	}
	n, err := rewriteEncrypted(ctx, mc, encryptedResources(), labelEncryptionKeyName, map[string]any{labelEncryptionKeyName: nil}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n < total+1 {
		t.Fatalf("removing the labels patched %d objects, want at least %d", n, total+1)
	}
	for name, v := range versions() {
		if !strings.HasSuffix(v, "/") {
			t.Errorf("%s keeps its label after the completion's run: %s", name, v)
		}
	}
}
