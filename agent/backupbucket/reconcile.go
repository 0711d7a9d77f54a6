package backupbucket

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8smetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/extension"
	"github.com/trellis-dev/trellis/agent/hubobject"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Names, as Gardener spells them.
const (
	// GardenNamespace is the namespace of the bucket secrets, in the seed and on the hub.
	GardenNamespace = "garden"
	// FinalizerGardener guards a BackupBucket on the hub until its extension object is gone.
	FinalizerGardener = "gardener"
	// FinalizerGeneratedSecret guards the generated secret on the hub, which only the bucket's deletion removes.
	FinalizerGeneratedSecret = "core.gardener.cloud/backupbucket"
	// SeedSecretPrefix prefixes the copy of a bucket's credentials in the seed's garden namespace.
	SeedSecretPrefix = "bucket-"
	// GeneratedSecretPrefix prefixes the copy on the hub of the secret the extension generated for a bucket.
	GeneratedSecretPrefix = "generated-bucket-"
)

// ensureSeedBucket creates the core BackupBucket of the agent's Seed when the Seed configures backups, as gardenlet's
// seed controller does: named after the Seed's UID, with the Seed's backup provider, region (the Seed's region by
// default), providerConfig and credentials, owned by the Seed. An existing bucket follows the Seed's providerConfig
// and credentials; provider and region are immutable.
func (c *Controller) ensureSeedBucket(ctx context.Context) error {
	seed, ok := cache.Get[*corev1beta1.Seed](c.cfg.Cache, resources.Seeds, "", c.cfg.SeedName)
	backup := seed.GetSpec().GetBackup()
	if !ok || backup == nil || seed.GetMetadata().GetUid() == "" || seed.GetMetadata().GetDeletionTimestamp() != nil {
		return nil
	}
	name := seed.GetMetadata().GetUid()
	region := backup.GetRegion()
	if region == "" {
		region = seed.GetSpec().GetProvider().GetRegion()
	}
	cur, ok := cache.Get[*corev1beta1.BackupBucket](c.cfg.Cache, resources.BackupBuckets, "", name)
	if cur, ok = c.Objects.Pick(name, cur, ok); !ok {
		b := &corev1beta1.BackupBucket{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "BackupBucket",
			Metadata: &metav1.ObjectMeta{Name: name, OwnerReferences: []*metav1.OwnerReference{{
				ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Seed", Name: c.cfg.SeedName, Uid: seed.GetMetadata().GetUid(),
				Controller: proto.Bool(true), BlockOwnerDeletion: proto.Bool(true)}}},
			Spec: &corev1beta1.BackupBucketSpec{
				Provider:       &corev1beta1.BackupBucketProvider{Type: backup.GetProvider(), Region: region},
				ProviderConfig: backup.GetProviderConfig(), CredentialsRef: backup.GetCredentialsRef(), SeedName: proto.String(c.cfg.SeedName)},
		}
		cctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
		out, err := c.buckets.Create(cctx, b)
		cancel()
		switch {
		case err == nil:
			c.Objects.Remember(out)
			c.log.Info("created the seed's BackupBucket", "backupBucket", name)
			c.Add(name)
			return nil
		case status.Code(err) == codes.AlreadyExists:
			return nil // the cache has not seen it yet; its event brings us back
		default:
			return fmt.Errorf("create the seed's BackupBucket %s: %w", name, err)
		}
	}
	upToDate := func(b *corev1beta1.BackupBucket) bool {
		return extension.SameJSON(extension.RawExtension(b.GetSpec().GetProviderConfig()), extension.RawExtension(backup.GetProviderConfig())) &&
			proto.Equal(b.GetSpec().GetCredentialsRef(), backup.GetCredentialsRef())
	}
	if upToDate(cur) {
		return nil
	}
	_, err := c.Objects.Update(ctx, cur, func(b *corev1beta1.BackupBucket) bool {
		if upToDate(b) {
			return false
		}
		if b.Spec == nil {
			b.Spec = &corev1beta1.BackupBucketSpec{}
		}
		b.Spec.ProviderConfig, b.Spec.CredentialsRef = backup.GetProviderConfig(), backup.GetCredentialsRef()
		return true
	})
	return err
}

// reconcile makes the extension BackupBucket match the core one and reports on the core one, in Gardener's way: the
// extension object is (re)written with the reconcile annotation when it is missing, its spec or credentials changed,
// or its last operation Failed; otherwise the controller looks at it until it is ready, and then copies the secret
// the extension generated to the hub and reports Succeeded with the extension's providerStatus.
func (c *Controller) reconcile(ctx context.Context, b *corev1beta1.BackupBucket) (time.Duration, error) {
	name := b.GetMetadata().GetName()
	b, err := c.Objects.AddFinalizer(ctx, b, FinalizerGardener)
	if err != nil {
		return 0, err
	}
	typ := operationType(b)
	creds, err := c.credentials(b)
	if err != nil {
		if _, rerr := c.report(ctx, b, hubobject.Failed(typ, hubobject.ErrorOf(err)), nil); rerr != nil {
			c.log.Warn("could not report on the BackupBucket", "backupBucket", name, "err", rerr)
		}
		return 0, err
	}
	if err := c.ensureGardenNamespace(ctx); err != nil {
		return 0, err
	}
	secretChanged, rotated, err := c.ensureSeedSecret(ctx, name, creds.GetData())
	if err != nil {
		return 0, err
	}

	spec := desiredSpec(b)
	ext := &extensionsv1alpha1.BackupBucket{ObjectMeta: k8smetav1.ObjectMeta{Name: name}}
	err = c.cfg.Seed.Get(ctx, client.ObjectKeyFromObject(ext), ext)
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("read %s: %w", extension.Describe(ext), err)
	}
	lo := ext.Status.LastOperation
	var why string
	switch {
	case apierrors.IsNotFound(err):
		why = "created"
	case !sameSpec(ext.Spec, spec):
		why = "spec changed"
	case rotated, lo != nil && lo.LastUpdateTime.Time.Before(secretChanged.Truncate(time.Second)):
		why = "credentials changed"
	default:
		why = extension.Rerequest(ext, c.cfg.Now())
	}
	if why != "" {
		if _, err := c.Ext.Deploy(ctx, ext, extensionsv1alpha1.OperationReconcile, func() { ext.Spec = spec }); err != nil {
			if extension.Raced(err) {
				return c.cfg.PollInterval, nil
			}
			return 0, err
		}
		c.log.Info("deployed the extension BackupBucket", "backupBucket", name, "reason", why)
		_, err := c.report(ctx, b, hubobject.Processing(typ, "Reconciliation of BackupBucket state initialized."), nil)
		return c.cfg.PollInterval, err
	}

	switch err := extension.CheckReady(ext, ""); {
	case errors.As(err, new(*extension.CodedError)):
		_, rerr := c.report(ctx, b, hubobject.Failed(typ, hubobject.ErrorOf(err)), nil)
		return c.cfg.PollInterval, rerr
	case err != nil:
		_, rerr := c.report(ctx, b, hubobject.Processing(typ, "Reconciliation of BackupBucket state initialized."), nil)
		return c.cfg.PollInterval, rerr
	}

	extra := map[string]any{}
	if ref := ext.Status.GeneratedSecretRef; ref != nil {
		if b, err = c.syncGeneratedSecret(ctx, b, ref); err != nil {
			return 0, err
		}
	}
	if ps := ext.Status.ProviderStatus; !extension.SameJSON(ps, extension.RawExtension(b.GetStatus().GetProviderStatus())) {
		extra["providerStatus"] = rawOrNil(ps)
	}
	if b.GetStatus().GetObservedGeneration() != b.GetMetadata().GetGeneration() {
		extra["observedGeneration"] = b.GetMetadata().GetGeneration()
	}
	if st := b.GetStatus(); len(extra) > 0 || st.GetLastError() != nil || st.GetLastOperation().GetState() != hubobject.StateSucceeded {
		if _, err := c.report(ctx, b, hubobject.Succeeded(typ, "Backup Bucket has been successfully reconciled."), extra); err != nil {
			return 0, err
		}
	}
	return c.cfg.SyncPeriod, nil
}

// delete deletes the extension BackupBucket (the extension deletes the bucket), waits until it is gone, deletes the
// secrets the controller made, and removes the finalizer so that the hub deletes the core bucket.
func (c *Controller) delete(ctx context.Context, b *corev1beta1.BackupBucket) (time.Duration, error) {
	name := b.GetMetadata().GetName()
	if !slices.Contains(b.GetMetadata().GetFinalizers(), FinalizerGardener) {
		return 0, nil
	}
	b, err := c.report(ctx, b, hubobject.Processing(opDelete, "Deletion of BackupBucket state initialized."), nil)
	if err != nil {
		return 0, err
	}
	if err := c.deleteGeneratedSecret(ctx, b); err != nil {
		return 0, err
	}
	if b, err = c.forgetGeneratedSecret(ctx, b); err != nil {
		return 0, err
	}
	// The extension needs the credentials to delete the bucket: refresh them while the hub still has them.
	if creds, err := c.credentials(b); err == nil {
		if err := c.ensureGardenNamespace(ctx); err != nil {
			return 0, err
		}
		if _, _, err := c.ensureSeedSecret(ctx, name, creds.GetData()); err != nil {
			return 0, err
		}
	}
	ext := &extensionsv1alpha1.BackupBucket{ObjectMeta: k8smetav1.ObjectMeta{Name: name}}
	if err := c.Ext.Destroy(ctx, ext); err != nil {
		return 0, err
	}
	err = c.cfg.Seed.Get(ctx, client.ObjectKeyFromObject(ext), ext)
	switch {
	case err == nil:
		if le := ext.Status.LastError; le != nil {
			e := hubobject.ExtensionLastError(le)
			e.Description += " Operation will be retried."
			_, rerr := c.report(ctx, b, hubobject.Failed(opDelete, e), nil)
			return c.cfg.PollInterval, rerr
		}
		return c.cfg.PollInterval, nil
	case !apierrors.IsNotFound(err):
		return 0, fmt.Errorf("read %s: %w", extension.Describe(ext), err)
	}
	sec := &corev1.Secret{ObjectMeta: k8smetav1.ObjectMeta{Namespace: GardenNamespace, Name: SeedSecretPrefix + name}}
	if err := c.cfg.Seed.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("delete secret %s/%s in the seed: %w", sec.Namespace, sec.Name, err)
	}
	if b, err = c.report(ctx, b, hubobject.Succeeded(opDelete, "Backup Bucket has been successfully deleted."), nil); err != nil {
		return 0, err
	}
	if _, err := c.Objects.RemoveFinalizer(ctx, b, FinalizerGardener); err != nil && status.Code(err) != codes.NotFound {
		return 0, err
	}
	c.log.Info("BackupBucket deleted", "backupBucket", name)
	return 0, nil
}

// credentials returns the secret the bucket's credentialsRef names, from the agent's cache.
func (c *Controller) credentials(b *corev1beta1.BackupBucket) (*kcorev1.Secret, error) {
	ref := b.GetSpec().GetCredentialsRef()
	if ref.GetName() == "" {
		return nil, fmt.Errorf("BackupBucket %s has no credentialsRef", b.GetMetadata().GetName())
	}
	if k := ref.GetKind(); k != "" && k != "Secret" {
		return nil, fmt.Errorf("BackupBucket %s: credentials of kind %s are not supported, only Secrets", b.GetMetadata().GetName(), k)
	}
	s, ok := cache.Get[*kcorev1.Secret](c.cfg.Cache, resources.Secrets, ref.GetNamespace(), ref.GetName())
	if !ok {
		return nil, fmt.Errorf("credentials secret %s/%s of BackupBucket %s is not known to the agent yet", ref.GetNamespace(), ref.GetName(), b.GetMetadata().GetName())
	}
	return s, nil
}

// ensureGardenNamespace creates the seed's garden namespace, where the bucket secrets live, if it is missing.
func (c *Controller) ensureGardenNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: k8smetav1.ObjectMeta{Name: GardenNamespace}}
	if err := c.cfg.Seed.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s in the seed: %w", GardenNamespace, err)
	}
	return nil
}

// ensureSeedSecret keeps the copy of a bucket's credentials in the seed (garden/bucket-<name>). It returns when their
// data last changed, which the secret's gardener.cloud/timestamp annotation records (an extension object whose last
// operation is older has not seen the current credentials, also after a restart of the agent), and whether this
// call changed them (the timestamp alone cannot tell within a second).
func (c *Controller) ensureSeedSecret(ctx context.Context, bucket string, data map[string][]byte) (time.Time, bool, error) {
	sec := &corev1.Secret{ObjectMeta: k8smetav1.ObjectMeta{Namespace: GardenNamespace, Name: SeedSecretPrefix + bucket}}
	err := c.cfg.Seed.Get(ctx, client.ObjectKeyFromObject(sec), sec)
	if err != nil && !apierrors.IsNotFound(err) {
		return time.Time{}, false, fmt.Errorf("read secret %s/%s in the seed: %w", sec.Namespace, sec.Name, err)
	}
	ts, perr := time.Parse(time.RFC3339Nano, sec.Annotations[extensionsv1alpha1.AnnotationTimestamp])
	same := err == nil && maps.EqualFunc(sec.Data, data, func(a, b []byte) bool { return string(a) == string(b) })
	if same && perr == nil {
		return ts, false, nil
	}
	ts = c.cfg.Now().UTC()
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	sec.Annotations[extensionsv1alpha1.AnnotationTimestamp] = ts.Format(time.RFC3339Nano)
	sec.Data = data
	if apierrors.IsNotFound(err) {
		err = c.cfg.Seed.Create(ctx, sec)
	} else {
		err = c.cfg.Seed.Update(ctx, sec)
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("write secret %s/%s in the seed: %w", sec.Namespace, sec.Name, err)
	}
	return ts, !same, nil
}

// syncGeneratedSecret copies the secret the extension generated (ref, in the seed) to the hub as
// garden/generated-bucket-<name>, owned by the bucket and guarded by a finalizer. As gardenlet does, it first points
// the bucket's status.generatedSecretRef at it, so that the hub's seed authorizer relates the secret to the bucket
// before the agent writes it.
func (c *Controller) syncGeneratedSecret(ctx context.Context, b *corev1beta1.BackupBucket, ref *corev1.SecretReference) (*corev1beta1.BackupBucket, error) {
	src := &corev1.Secret{}
	if err := c.cfg.Seed.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, src); err != nil {
		return b, fmt.Errorf("read the generated secret %s/%s in the seed: %w", ref.Namespace, ref.Name, err)
	}
	name := GeneratedSecretPrefix + b.GetMetadata().GetName()
	if r := b.GetStatus().GetGeneratedSecretRef(); r.GetName() != name || r.GetNamespace() != GardenNamespace {
		out, err := c.Objects.PatchStatus(ctx, b, map[string]any{"generatedSecretRef": map[string]string{"name": name, "namespace": GardenNamespace}})
		if err != nil {
			return b, err
		}
		b = out
	}
	owner := &metav1.OwnerReference{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "BackupBucket", Name: b.GetMetadata().GetName(),
		Uid: b.GetMetadata().GetUid(), Controller: proto.Bool(true), BlockOwnerDeletion: proto.Bool(true)}
	want := func(s *kcorev1.Secret) bool { // makes s what it should be; false when it is already
		changed := false
		if !maps.EqualFunc(s.GetData(), src.Data, func(a, b []byte) bool { return string(a) == string(b) }) {
			s.Data, changed = maps.Clone(src.Data), true
		}
		if !slices.Contains(s.Metadata.Finalizers, FinalizerGeneratedSecret) {
			s.Metadata.Finalizers, changed = append(s.Metadata.Finalizers, FinalizerGeneratedSecret), true
		}
		if !slices.ContainsFunc(s.Metadata.OwnerReferences, func(o *metav1.OwnerReference) bool { return proto.Equal(o, owner) }) {
			s.Metadata.OwnerReferences, changed = []*metav1.OwnerReference{owner}, true
		}
		return changed
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	cur, ok := cache.Get[*kcorev1.Secret](c.cfg.Cache, resources.Secrets, GardenNamespace, name)
	if !ok {
		s := &kcorev1.Secret{ApiVersion: "v1", Kind: "Secret", Type: "Opaque", Metadata: &metav1.ObjectMeta{Namespace: GardenNamespace, Name: name}}
		want(s)
		_, err := c.secrets.Create(cctx, s)
		if err == nil {
			return b, nil
		}
		if status.Code(err) != codes.AlreadyExists {
			return b, fmt.Errorf("create secret %s/%s on the hub: %w", GardenNamespace, name, err)
		}
		// It exists, and the cache does not know it yet: update the hub's state.
		if cur, err = c.secrets.Get(cctx, &metav1.GetRequest{Namespace: GardenNamespace, Name: name}); err != nil {
			return b, fmt.Errorf("read secret %s/%s on the hub: %w", GardenNamespace, name, err)
		}
	}
	s := proto.Clone(cur).(*kcorev1.Secret)
	if !want(s) {
		return b, nil
	}
	if _, err := c.secrets.Update(cctx, s); err != nil {
		return b, fmt.Errorf("update secret %s/%s on the hub: %w", GardenNamespace, name, err)
	}
	return b, nil
}

// deleteGeneratedSecret removes the generated secret's finalizer and deletes it on the hub.
func (c *Controller) deleteGeneratedSecret(ctx context.Context, b *corev1beta1.BackupBucket) error {
	ref := b.GetStatus().GetGeneratedSecretRef()
	if ref == nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	cur, err := c.secrets.Get(cctx, &metav1.GetRequest{Namespace: ref.GetNamespace(), Name: ref.GetName()})
	switch status.Code(err) {
	case codes.NotFound:
		return nil
	case codes.OK:
	default:
		return fmt.Errorf("read secret %s/%s on the hub: %w", ref.GetNamespace(), ref.GetName(), err)
	}
	if i := slices.Index(cur.GetMetadata().GetFinalizers(), FinalizerGeneratedSecret); i >= 0 {
		cur.Metadata.Finalizers = slices.Delete(cur.Metadata.Finalizers, i, i+1)
		if _, err := c.secrets.Update(cctx, cur); err != nil && status.Code(err) != codes.NotFound {
			return fmt.Errorf("remove the finalizer of secret %s/%s on the hub: %w", ref.GetNamespace(), ref.GetName(), err)
		}
	}
	if _, err := c.secrets.Delete(cctx, &metav1.DeleteRequest{Namespace: ref.GetNamespace(), Name: ref.GetName()}); err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("delete secret %s/%s on the hub: %w", ref.GetNamespace(), ref.GetName(), err)
	}
	return nil
}

// forgetGeneratedSecret clears status.generatedSecretRef once the secret is gone: the hub's seed authorizer answers
// reads of a secret that does not exist with PermissionDenied, so a reference to nothing would be retried forever.
func (c *Controller) forgetGeneratedSecret(ctx context.Context, b *corev1beta1.BackupBucket) (*corev1beta1.BackupBucket, error) {
	if b.GetStatus().GetGeneratedSecretRef() == nil {
		return b, nil
	}
	return c.Objects.PatchStatus(ctx, b, map[string]any{"generatedSecretRef": nil})
}

// desiredSpec is the extension BackupBucket's spec for b.
func desiredSpec(b *corev1beta1.BackupBucket) extensionsv1alpha1.BackupBucketSpec {
	return extensionsv1alpha1.BackupBucketSpec{
		DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: b.GetSpec().GetProvider().GetType(), ProviderConfig: extension.RawExtension(b.GetSpec().GetProviderConfig())},
		Region:      b.GetSpec().GetProvider().GetRegion(),
		SecretRef:   corev1.SecretReference{Namespace: GardenNamespace, Name: SeedSecretPrefix + b.GetMetadata().GetName()},
	}
}

func sameSpec(a, b extensionsv1alpha1.BackupBucketSpec) bool {
	return a.Type == b.Type && a.Class == nil && a.Region == b.Region && a.SecretRef == b.SecretRef &&
		extension.SameJSON(a.ProviderConfig, b.ProviderConfig)
}

// rawOrNil is a RawExtension as a value of a JSON merge patch: its JSON, or null to remove the field.
func rawOrNil(r *runtime.RawExtension) any {
	if r == nil || r.Raw == nil || string(r.Raw) == "null" {
		return nil
	}
	return json.RawMessage(r.Raw)
}
