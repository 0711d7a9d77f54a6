package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// Backup outputs.
const (
	// GardenNamespace is the seed's garden namespace, where a bucket's generated secret goes.
	GardenNamespace = "garden"
	// GeneratedBucketSecretPrefix starts the name of a bucket's generated secret, as in Gardener.
	GeneratedBucketSecretPrefix = "generated-bucket-"
)

// backupBucket makes a bucket as the directory <backup root>/<bucket name> and the secret to reach it,
// generated-bucket-<name> in the seed's garden namespace (keys bucketName, backupRoot, hostPath), referenced by
// status.generatedSecretRef. The directory is external state: Migrate keeps it, Delete removes it with everything
// in it.
type backupBucket struct {
	seed
	root string
}

func (a *backupBucket) dir(bb *extensionsv1alpha1.BackupBucket) string {
	return filepath.Join(a.root, bb.Name)
}

func (a *backupBucket) Reconcile(ctx context.Context, log logr.Logger, bb *extensionsv1alpha1.BackupBucket, _ *extsdk.Cluster) error {
	dir := a.dir(bb)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create bucket directory: %w", err)
	}
	name := GeneratedBucketSecretPrefix + bb.Name
	s := corev1ac.Secret(name, GardenNamespace).WithLabels(ownerLabels("backupbucket", bb.Name)).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{"bucketName": []byte(bb.Name), "backupRoot": []byte(a.root), "hostPath": []byte(dir)})
	if err := a.applyCreatingNamespace(ctx, s); err != nil {
		return fmt.Errorf("deploy the generated bucket secret: %w", err)
	}
	log.V(1).Info("Bucket ready", "directory", dir)
	bb.Status.GeneratedSecretRef = &corev1.SecretReference{Name: name, Namespace: GardenNamespace}
	return nil
}

func (a *backupBucket) Delete(ctx context.Context, log logr.Logger, bb *extensionsv1alpha1.BackupBucket, _ *extsdk.Cluster) error {
	if errs := a.Validate(ctx, bb, nil); len(errs) == 0 {
		log.Info("Deleting bucket directory", "directory", a.dir(bb))
		if err := os.RemoveAll(a.dir(bb)); err != nil {
			return fmt.Errorf("delete bucket directory: %w", err)
		}
	}
	return a.remove(ctx, a.secret(bb))
}

// Migrate deletes the generated secret and keeps the directory.
func (a *backupBucket) Migrate(ctx context.Context, _ logr.Logger, bb *extensionsv1alpha1.BackupBucket, _ *extsdk.Cluster) error {
	return a.remove(ctx, a.secret(bb))
}

func (a *backupBucket) secret(bb *extensionsv1alpha1.BackupBucket) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: GeneratedBucketSecretPrefix + bb.Name, Namespace: GardenNamespace}}
}

// Validate implements controller.ConfigValidator: the bucket's name is a directory name.
func (a *backupBucket) Validate(_ context.Context, bb *extensionsv1alpha1.BackupBucket, _ *extsdk.Cluster) field.ErrorList {
	return validatePathElement(field.NewPath("metadata", "name"), bb.Name)
}

// validatePathElement checks that s names one directory entry, not a path.
func validatePathElement(p *field.Path, s string) field.ErrorList {
	if s == "" || s == "." || s == ".." || filepath.Base(s) != s {
		return field.ErrorList{field.Invalid(p, s, "must be a single directory name")}
	}
	return nil
}
