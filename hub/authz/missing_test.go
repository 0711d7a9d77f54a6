package authz_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/hub/auth"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/objectnames"
	"github.com/trellis-dev/trellis/test/hubtest"
)

// waitFor polls cond until it holds or 10 s pass: the seed graph follows the store asynchronously.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSeedAgentGetsMissingReferencedObjects runs seed agents against a real hub and its seed graph: a get of an object
// the seed's objects reference (a BackupBucket's generated secret, a shoot's BackupEntry) answers NotFound while the
// object does not exist — before it is created and after it is deleted — and the object while it does. Another
// seed's agent, a get of a missing object nobody references, and writes of a missing referenced object are Forbidden.
func TestSeedAgentGetsMissingReferencedObjects(t *testing.T) {
	h := hubtest.Start(t)
	h.RegisterExtensions(t, "provider-local", append(hubtest.LocalExtensions(), "Network/calico", "OperatingSystemConfig/gardenlinux")...)
	garden(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	certA := clientCert(t, h, []string{auth.SeedsGroup}, auth.SeedUserName("a"))
	certB := clientCert(t, h, []string{auth.SeedsGroup}, auth.SeedUserName("b"))
	connA, connB := grpcConn(t, h, &certA), grpcConn(t, h, &certB)
	a, b, admin := newAgentAPIWith("a", connA), newAgentAPIWith("b", connB), newAgentAPIWith("", h.GRPC(t))
	secretsA, secretsB, adminSecrets := kcorev1.NewSecretServiceClient(connA), kcorev1.NewSecretServiceClient(connB), kcorev1.NewSecretServiceClient(h.GRPC(t))

	// Seed a's bucket names its generated secret, which does not exist.
	const generated = "generated-bucket-bucket-a"
	bucket, err := admin.buckets.Create(ctx, &corev1beta1.BackupBucket{Metadata: &metav1.ObjectMeta{Name: "bucket-a"}, Spec: &corev1beta1.BackupBucketSpec{
		Provider: &corev1beta1.BackupBucketProvider{Type: "local", Region: "local"}, SeedName: proto.String("a"),
		CredentialsRef: &metav1.ObjectReference{ApiVersion: "v1", Kind: "Secret", Name: "backup", Namespace: "garden"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	bucket.Status = &corev1beta1.BackupBucketStatus{GeneratedSecretRef: &metav1.SecretReference{Namespace: "garden", Name: generated}}
	if _, err := admin.buckets.UpdateStatus(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	getSecret := func(c kcorev1.SecretServiceClient, name string) error {
		_, err := c.Get(ctx, &metav1.GetRequest{Namespace: "garden", Name: name})
		return err
	}
	waitFor(t, "seed a's agent gets NotFound for the generated secret its bucket names", func() bool {
		return status.Code(getSecret(secretsA, generated)) == codes.NotFound
	})
	wantCode(t, "seed b's agent gets the secret seed a's bucket names", getSecret(secretsB, generated), codes.PermissionDenied, `does not belong to seed "b"`)
	wantCode(t, "get a missing secret nobody references", getSecret(secretsA, "generated-bucket-bucket-b"), codes.PermissionDenied)
	_, err = secretsA.Update(ctx, &kcorev1.Secret{Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: generated}})
	wantCode(t, "update the missing referenced secret", err, codes.PermissionDenied)
	_, err = secretsA.Delete(ctx, &metav1.DeleteRequest{Namespace: "garden", Name: generated})
	wantCode(t, "delete the missing referenced secret", err, codes.PermissionDenied)

	// Once it exists the agent reads it; once it is deleted again, NotFound again.
	if _, err := adminSecrets.Create(ctx, &kcorev1.Secret{Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: generated}, Data: map[string][]byte{"k": []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "seed a's agent reads the generated secret", func() bool { return getSecret(secretsA, generated) == nil })
	wantCode(t, "seed b's agent gets seed a's generated secret", getSecret(secretsB, generated), codes.PermissionDenied)
	if _, err := adminSecrets.Delete(ctx, &metav1.DeleteRequest{Namespace: "garden", Name: generated}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "seed a's agent gets NotFound for the deleted generated secret", func() bool {
		return status.Code(getSecret(secretsA, generated)) == codes.NotFound
	})

	// The shoot's BackupEntry (<technical ID>--<UID>) before the agent creates it.
	own, err := a.shoots.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "s-a"})
	if err != nil {
		t.Fatal(err)
	}
	own.Status = &corev1beta1.ShootStatus{TechnicalId: "shoot--dev--s-a"}
	updateShootStatus(ctx, t, a.shoots, own)
	entry := objectnames.BackupEntryName("shoot--dev--s-a", own.GetMetadata().GetUid())
	getEntry := func(ag agentAPI, name string) error {
		_, err := ag.entries.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: name})
		return err
	}
	waitFor(t, "seed a's agent gets NotFound for its shoot's BackupEntry", func() bool { return status.Code(getEntry(a, entry)) == codes.NotFound })
	wantCode(t, "seed b's agent gets the BackupEntry of seed a's shoot", getEntry(b, entry), codes.PermissionDenied)
	theirs, err := admin.shoots.Get(ctx, &metav1.GetRequest{Namespace: "garden-dev", Name: "s-b"})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "seed a's agent gets the BackupEntry of seed b's shoot", getEntry(a, objectnames.BackupEntryName("shoot--dev--s-b", theirs.GetMetadata().GetUid())), codes.PermissionDenied)
	wantCode(t, "seed a's agent gets an entry of its shoot's technical ID with another UID", getEntry(a, objectnames.BackupEntryName("shoot--dev--s-a", "other")), codes.PermissionDenied)
}
