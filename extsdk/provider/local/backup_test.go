package local_test

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/provider/local"
)

// TestBackup runs a BackupBucket and a BackupEntry of the test's "shoot" through reconcile, migrate, restore and
// delete, and checks the directories and secrets they make.
func TestBackup(t *testing.T) {
	e := newEnv(t)
	ns := e.Namespace
	root := e.cfg.BackupDir
	creds := secret(ns, "backup-credentials")
	creds.Data = map[string][]byte{"token": []byte("local")}
	if err := e.Client.Create(e.ctx(), creds); err != nil {
		t.Fatal(err)
	}
	ref := corev1.SecretReference{Name: creds.Name, Namespace: ns}

	// The bucket (named like the seed's UID): a directory and the generated secret in the garden namespace.
	bucket := &extensionsv1alpha1.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: "bucket-" + ns}}
	bucket.Spec.Region, bucket.Spec.SecretRef = "local", ref
	e.deploy(bucket)
	bucketDir := filepath.Join(root, bucket.Name)
	if fi, err := os.Stat(bucketDir); err != nil || !fi.IsDir() {
		t.Fatalf("bucket directory: %v", err)
	}
	g := bucket.Status.GeneratedSecretRef
	if g == nil || g.Namespace != local.GardenNamespace || g.Name != local.GeneratedBucketSecretPrefix+bucket.Name {
		t.Fatalf("generatedSecretRef = %+v", g)
	}
	generated := secret(g.Namespace, g.Name)
	e.get(generated)
	if string(generated.Data["bucketName"]) != bucket.Name || string(generated.Data["backupRoot"]) != root {
		t.Errorf("generated secret = %v", generated.Data)
	}

	// An entry of a bucket that does not exist waits for it, with a retryable code.
	orphan := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: ns + "--orphan"}}
	orphan.Spec.BucketName = "no-such-bucket-" + ns
	e.create(orphan)
	e.waitError(orphan, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.ErrorRetryableInfraDependencies)
	e.deleteAndWait(orphan)
	// A bucket name that is a path is a configuration problem.
	bad := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: ns + "--bad"}}
	bad.Spec.BucketName = "../" + bucket.Name
	e.create(bad)
	e.waitError(bad, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.ErrorConfigurationProblem)
	e.deleteAndWait(bad)

	// The entry <technical id>--<uid>: a prefix directory and etcd-backup in the shoot's namespace.
	entry := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: ns + "--4b8c2d1e"}}
	entry.Spec.Region, entry.Spec.BucketName, entry.Spec.SecretRef = "local", bucket.Name, ref
	e.deploy(entry)
	entryDir := filepath.Join(bucketDir, entry.Name)
	if fi, err := os.Stat(entryDir); err != nil || !fi.IsDir() {
		t.Fatalf("entry directory: %v", err)
	}
	etcdBackup := secret(ns, local.EtcdBackupSecret)
	e.get(etcdBackup)
	if string(etcdBackup.Data["bucketName"]) != bucket.Name || string(etcdBackup.Data["hostPath"]) != root ||
		string(etcdBackup.Data["token"]) != "local" {
		t.Errorf("etcd-backup = %v", etcdBackup.Data)
	}
	snapshot := filepath.Join(entryDir, "Full-00000000-00000001-1")
	if err := os.WriteFile(snapshot, []byte("snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Migrate removes only the secret; restore makes it again.
	e.annotate(entry, extensionsv1alpha1.OperationMigrate, nil)
	e.waitOperation(entry, extensionsv1alpha1.LastOperationTypeMigrate)
	e.absent(secret(ns, local.EtcdBackupSecret))
	if _, err := os.Stat(snapshot); err != nil {
		t.Errorf("migration lost the backup: %v", err)
	}
	e.annotate(entry, extensionsv1alpha1.OperationRestore, nil)
	e.waitOperation(entry, extensionsv1alpha1.LastOperationTypeRestore)
	e.get(secret(ns, local.EtcdBackupSecret))

	// Delete removes the prefix and the secret, not the bucket; then the bucket goes.
	e.deleteAndWait(entry)
	if _, err := os.Stat(entryDir); !os.IsNotExist(err) {
		t.Errorf("entry directory after deletion: %v", err)
	}
	e.absent(secret(ns, local.EtcdBackupSecret))
	if _, err := os.Stat(bucketDir); err != nil {
		t.Errorf("bucket directory after the entry's deletion: %v", err)
	}
	e.deleteAndWait(bucket)
	if _, err := os.Stat(bucketDir); !os.IsNotExist(err) {
		t.Errorf("bucket directory after deletion: %v", err)
	}
	e.absent(generated)
}
