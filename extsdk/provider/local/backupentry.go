package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
)

// Backup entry outputs.
const (
	// EtcdBackupSecret is the secret etcd's backup sidecar reads in the shoot's namespace, as in Gardener.
	EtcdBackupSecret = "etcd-backup"
	// sourcePrefix marks the source entry of a restore from another bucket (Gardener's "source-").
	sourcePrefix = "source-"
)

// backupEntry makes an entry as the directory <backup root>/<bucket>/<entry> (the entry name without a "source-"
// prefix) and the etcd-backup secret (source-etcd-backup for source entries) in the shoot's namespace, which is the
// entry name up to its last "--" (<technical id>--<shoot uid>). The secret has the keys of spec.secretRef's secret
// plus bucketName and hostPath; it is skipped while the namespace does not exist (an entry outlives its shoot).
// Migrate deletes only the secret; Delete also the directory.
type backupEntry struct {
	seed
	root string
}

// entryNames returns the directory name of an entry, the name of its etcd-backup secret and the namespace of the
// secret ("" when the name has no "--").
func entryNames(name string) (entry, secret, namespace string) {
	entry, secret = name, EtcdBackupSecret
	if rest, ok := strings.CutPrefix(name, sourcePrefix); ok {
		entry, secret = rest, sourcePrefix+EtcdBackupSecret
	}
	if i := strings.LastIndex(entry, "--"); i > 0 {
		namespace = entry[:i]
	}
	return entry, secret, namespace
}

func (a *backupEntry) Reconcile(ctx context.Context, log logr.Logger, be *extensionsv1alpha1.BackupEntry, _ *extsdk.Cluster) error {
	bucket := filepath.Join(a.root, be.Spec.BucketName)
	if _, err := os.Stat(bucket); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return extsdk.WithCodes(fmt.Errorf("backup bucket %s does not exist in %s", be.Spec.BucketName, a.root),
				extensionsv1alpha1.ErrorRetryableInfraDependencies)
		}
		return fmt.Errorf("backup bucket %s: %w", be.Spec.BucketName, err)
	}
	entry, secretName, namespace := entryNames(be.Name)
	if err := os.MkdirAll(filepath.Join(bucket, entry), 0o755); err != nil {
		return fmt.Errorf("create entry directory: %w", err)
	}
	if namespace == "" {
		log.Info("Entry name has no namespace part; no etcd-backup secret", "name", be.Name)
		return nil
	}
	data := map[string][]byte{}
	if ref := be.Spec.SecretRef; ref.Name != "" {
		s := &corev1.Secret{}
		if err := a.r.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, s); err != nil {
			return fmt.Errorf("read backup secret %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		for k, v := range s.Data {
			data[k] = v
		}
	}
	data["bucketName"] = []byte(be.Spec.BucketName)
	data["hostPath"] = []byte(a.root)
	s := corev1ac.Secret(secretName, namespace).WithLabels(ownerLabels("backupentry", be.Name)).
		WithType(corev1.SecretTypeOpaque).WithData(data)
	// A missing namespace means the shoot is gone; it is not created again.
	err := a.apply(ctx, s)
	if apierrors.IsNotFound(err) {
		log.Info("Shoot namespace does not exist; no etcd-backup secret", "namespace", namespace)
		return nil
	}
	if err != nil {
		return fmt.Errorf("deploy %s/%s: %w", namespace, secretName, err)
	}
	return nil
}

func (a *backupEntry) Delete(ctx context.Context, log logr.Logger, be *extensionsv1alpha1.BackupEntry, _ *extsdk.Cluster) error {
	entry, _, _ := entryNames(be.Name)
	// An invalid name never got a directory, and must not lead the removal outside the backup root.
	if errs := a.Validate(ctx, be, nil); len(errs) == 0 {
		dir := filepath.Join(a.root, be.Spec.BucketName, entry)
		log.Info("Deleting entry directory", "directory", dir)
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("delete entry directory: %w", err)
		}
	}
	return a.removeSecret(ctx, be)
}

// Migrate deletes the seed-local etcd-backup secret and keeps the backups.
func (a *backupEntry) Migrate(ctx context.Context, _ logr.Logger, be *extensionsv1alpha1.BackupEntry, _ *extsdk.Cluster) error {
	return a.removeSecret(ctx, be)
}

func (a *backupEntry) removeSecret(ctx context.Context, be *extensionsv1alpha1.BackupEntry) error {
	_, secret, namespace := entryNames(be.Name)
	if namespace == "" {
		return nil
	}
	return a.remove(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: namespace}})
}

// Validate implements controller.ConfigValidator: bucket and entry name are directory names.
func (a *backupEntry) Validate(_ context.Context, be *extensionsv1alpha1.BackupEntry, _ *extsdk.Cluster) field.ErrorList {
	entry, _, _ := entryNames(be.Name)
	return append(validatePathElement(field.NewPath("spec", "bucketName"), be.Spec.BucketName),
		validatePathElement(field.NewPath("metadata", "name"), entry)...)
}

// cluster returns the Cluster of the entry's shoot namespace, for failure injection through the Shoot; nil when
// there is none.
func (a *backupEntry) cluster(ctx context.Context, be *extensionsv1alpha1.BackupEntry) *extsdk.Cluster {
	_, _, namespace := entryNames(be.Name)
	if namespace == "" {
		return nil
	}
	c, err := extsdk.GetCluster(ctx, a.r, namespace)
	if err != nil {
		return nil
	}
	return c
}
