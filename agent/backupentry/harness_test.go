package backupentry_test

import (
	"context"
	"encoding/json"
	"testing"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/agenttest"
)

// The tests run the controller against real parts (test/agenttest): a hub, seed kube-apiservers (the package's
// shared one, and one more where a test needs two seeds) with the extension CRDs, real agents (controllers off) that
// give the controller its mTLS connection and its synced cache, and an extension built with extsdk/controller for
// type "test".
func TestMain(m *testing.M) { agenttest.Main(m) }

// env is one test's hub.
type env struct{ *agenttest.Hub }

// newEnv starts a hub with the "test" extension's backups registered (the hub admits buckets and entries of a
// registered type only).
func newEnv(t *testing.T) *env {
	e := &env{agenttest.StartHub(t)}
	e.RegisterExtensions(t, "backup-test", "BackupBucket/test", "BackupEntry/test")
	return e
}

// patchBucketStatus applies a JSON merge patch to the status of BackupBucket name as the admin.
func (e *env) patchBucketStatus(t *testing.T, name string, st map[string]any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := corev1beta1.NewBackupBucketServiceClient(e.Admin).Patch(context.Background(), &metav1.PatchRequest{Name: name,
		Patch: &metav1.RawExtension{Raw: body}, PatchType: "application/merge-patch+json", Subresource: "status"}); err != nil {
		t.Fatalf("patch status of BackupBucket %s: %v", name, err)
	}
}
