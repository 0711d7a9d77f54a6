package backupbucket_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// The tests run the controller against real parts (test/agenttest): a hub, the shared seed kube-apiserver of the
// package with the extension CRDs, a real agent (controllers off) that gives the controller its mTLS connection and
// its synced cache, and an extension built with extsdk/controller for type "test".
func TestMain(m *testing.M) { agenttest.Main(m) }

const seedName = "local"

// env is one test's hub and seed "local".
type env struct {
	*agenttest.Hub
	seed *agenttest.Seed
}

// newEnv starts a hub, creates objs on it through its API, and starts an agent for seed "local" whose seedConfig spec
// is seedSpec (YAML, indented for seedConfig.spec).
func newEnv(t *testing.T, seedSpec string, objs ...any) *env {
	t.Helper()
	e := &env{Hub: agenttest.StartHub(t)}
	// The "test" extension's backups, registered as the hub wants before it admits seeds and buckets of the type.
	e.RegisterExtensions(t, "backup-test", "BackupBucket/test", "BackupEntry/test")
	for _, o := range objs {
		e.create(t, o)
	}
	e.seed = e.StartSeed(t, seedName, seedSpec, seedtest.StartShared(t))
	return e
}

// create stores obj on the hub with the admin's rights, through the API (admission included).
func (e *env) create(t *testing.T, obj any) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *kcorev1.Secret:
		_, err = kcorev1.NewSecretServiceClient(e.Admin).Create(ctx, o)
	case *corev1beta1.BackupBucket:
		_, err = corev1beta1.NewBackupBucketServiceClient(e.Admin).Create(ctx, o)
	default:
		t.Fatalf("create: unsupported %T", obj)
	}
	if err != nil {
		t.Fatalf("create %T: %v", obj, err)
	}
}

// notFound reports whether err is the hub's NotFound.
func notFound(err error) bool { return status.Code(err) == codes.NotFound }
