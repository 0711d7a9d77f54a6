package backupentry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8smetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	// GardenNamespace is the seed's namespace of the entry secrets.
	GardenNamespace = "garden"
	// FinalizerGardener guards a BackupEntry on the hub until its extension object is gone.
	FinalizerGardener = "gardener"
	// SeedSecretPrefix prefixes the copy of an entry's bucket secret in the seed's garden namespace.
	SeedSecretPrefix = "entry-"
)

// entryState is what the controller found out about an entry before working on it.
type entryState struct {
	e      *corev1beta1.BackupEntry
	bucket *corev1beta1.BackupBucket
	// secret is the bucket's generated secret, or its credentials before it has one.
	secret *kcorev1.Secret
}

// reconcile makes the extension BackupEntry match the core one, in Gardener's way, once the entry's bucket is ready:
// it copies the bucket's secret into the seed (garden/entry-<name>), writes the extension object (type, region,
// providerConfig and providerStatus of the bucket, bucketName, secretRef) with the reconcile annotation when it is
// missing, its spec or secret changed, or its last operation Failed, and reports on the core entry until the
// extension reports it ready. An entry that comes from another seed is restored instead: the extension object is
// written with wait-for-state, given the state the ShootState holds for it, and annotated restore.
func (c *Controller) reconcile(ctx context.Context, e *corev1beta1.BackupEntry) (time.Duration, error) {
	key := hubobject.Key(e)
	e, err := c.Objects.AddFinalizer(ctx, e, FinalizerGardener)
	if err != nil {
		return 0, err
	}
	typ := operationType(e)
	st, err := c.dependencies(e)
	if err != nil {
		c.reportProblem(ctx, e, typ, err)
		if errors.As(err, new(*waiting)) {
			return c.cfg.SyncPeriod, nil // the bucket's events bring us back
		}
		return 0, err
	}
	if err := c.ensureGardenNamespace(ctx); err != nil {
		return 0, err
	}
	rotated, err := c.ensureSeedSecret(ctx, e.GetMetadata().GetName(), st.secret.GetData())
	if err != nil {
		return 0, err
	}

	spec := desiredSpec(st)
	ext := &extensionsv1alpha1.BackupEntry{ObjectMeta: k8smetav1.ObjectMeta{Name: e.GetMetadata().GetName()}}
	err = c.cfg.Seed.Get(ctx, client.ObjectKeyFromObject(ext), ext)
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("read %s: %w", extension.Describe(ext), err)
	}
	found := err == nil
	lo := ext.Status.LastOperation
	op, annotated := ext.Annotations[extensionsv1alpha1.AnnotationOperation]
	extra := map[string]any{}
	if e.GetStatus().GetSeedName() != c.cfg.SeedName {
		extra["seedName"] = c.cfg.SeedName
	}

	// A migrated extension object skips everything but restore, whatever the core entry says.
	if typ == opRestore || (found && lo != nil && lo.Type == extensionsv1alpha1.LastOperationTypeMigrate) {
		typ = opRestore
		restoring := found && (op == extensionsv1alpha1.OperationRestore ||
			(!annotated && lo != nil && lo.Type == extensionsv1alpha1.LastOperationTypeRestore))
		if !restoring {
			if err := c.startRestore(ctx, e, ext, spec); err != nil {
				return 0, err
			}
			c.log.Info("restoring the extension BackupEntry", "backupEntry", key)
			_, err := c.report(ctx, e, processing(opRestore), extra)
			return c.cfg.PollInterval, err
		}
	} else {
		var why string
		switch {
		case !found:
			why = "created"
		case !sameSpec(ext.Spec, spec):
			why = "spec changed"
		case rotated:
			why = "secret changed"
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
			c.log.Info("deployed the extension BackupEntry", "backupEntry", key, "reason", why)
			_, err := c.report(ctx, e, processing(typ), extra)
			return c.cfg.PollInterval, err
		}
	}

	switch err := extension.CheckReady(ext, ""); {
	case errors.As(err, new(*extension.CodedError)):
		_, rerr := c.report(ctx, e, hubobject.Failed(typ, hubobject.ErrorOf(err)), extra)
		return c.cfg.PollInterval, rerr
	case err != nil:
		_, rerr := c.report(ctx, e, processing(typ), extra)
		return c.cfg.PollInterval, rerr
	}
	if e.GetStatus().GetObservedGeneration() != e.GetMetadata().GetGeneration() {
		extra["observedGeneration"] = e.GetMetadata().GetGeneration()
	}
	if s := e.GetStatus(); len(extra) > 0 || s.GetLastError() != nil || s.GetLastOperation().GetState() != hubobject.StateSucceeded {
		if e, err = c.report(ctx, e, succeeded(typ), extra); err != nil {
			return 0, err
		}
	}
	if _, err := c.Objects.Update(ctx, e, removeRestoreAnnotation); err != nil {
		return 0, err
	}
	return c.cfg.SyncPeriod, nil
}

// startRestore writes the extension object with wait-for-state (the extension leaves it alone), puts the state the
// shoot's ShootState keeps for it into its status, and asks for the restore.
func (c *Controller) startRestore(ctx context.Context, e *corev1beta1.BackupEntry, ext *extensionsv1alpha1.BackupEntry, spec extensionsv1alpha1.BackupEntrySpec) error {
	state, err := c.savedState(ctx, e)
	if err != nil {
		return err
	}
	if _, err := c.Ext.Deploy(ctx, ext, extensionsv1alpha1.OperationWaitForState, func() { ext.Spec = spec }); err != nil {
		return err
	}
	if state != nil {
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"state": json.RawMessage(state)}})
		if err != nil {
			return err
		}
		if err := c.cfg.Seed.Status().Patch(ctx, ext, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("write the state of %s: %w", extension.Describe(ext), err)
		}
	}
	_, err = c.Ext.Annotate(ctx, ext, extensionsv1alpha1.OperationRestore)
	return err
}

// savedState is the state the ShootState of the entry's shoot keeps for the entry (kind BackupEntry, its name);
// nil when there is none.
func (c *Controller) savedState(ctx context.Context, e *corev1beta1.BackupEntry) ([]byte, error) {
	shoot := ownerShoot(e.GetMetadata())
	if shoot == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	ss, err := c.states.Get(ctx, &metav1.GetRequest{Namespace: e.GetMetadata().GetNamespace(), Name: shoot})
	switch status.Code(err) {
	case codes.OK:
	case codes.NotFound:
		return nil, nil
	default:
		return nil, fmt.Errorf("read the ShootState %s/%s: %w", e.GetMetadata().GetNamespace(), shoot, err)
	}
	for _, x := range ss.GetSpec().GetExtensions() {
		if x.GetKind() == "BackupEntry" && x.GetName() == e.GetMetadata().GetName() {
			if raw := x.GetState().GetRaw(); len(raw) > 0 {
				return raw, nil
			}
		}
	}
	return nil, nil
}

// migrate hands the entry over to the seed its spec.seedName names now: the extension object is annotated migrate
// (the extension cleans up what it has in this seed and keeps the backups), deleted once the migration succeeded,
// the seed's copy of the secret is deleted, and status.seedName is cleared, which lets the destination restore.
func (c *Controller) migrate(ctx context.Context, e *corev1beta1.BackupEntry) (time.Duration, error) {
	if !slices.Contains(e.GetMetadata().GetFinalizers(), FinalizerGardener) {
		return 0, nil
	}
	e, err := c.report(ctx, e, processing(opMigrate), nil)
	if err != nil {
		return 0, err
	}
	ext := &extensionsv1alpha1.BackupEntry{ObjectMeta: k8smetav1.ObjectMeta{Name: e.GetMetadata().GetName()}}
	err = c.cfg.Seed.Get(ctx, client.ObjectKeyFromObject(ext), ext)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return 0, fmt.Errorf("read %s: %w", extension.Describe(ext), err)
	default:
		lo := ext.Status.LastOperation
		migrating := lo != nil && lo.Type == extensionsv1alpha1.LastOperationTypeMigrate
		_, annotated := ext.Annotations[extensionsv1alpha1.AnnotationOperation]
		switch {
		case ext.DeletionTimestamp != nil:
		case migrating && ext.Status.LastError != nil:
			_, err := c.report(ctx, e, hubobject.Failed(opMigrate, hubobject.ExtensionLastError(ext.Status.LastError)), nil)
			return c.cfg.PollInterval, err
		case migrating && lo.State == extensionsv1alpha1.LastOperationStateSucceeded && !annotated:
			// The extension removed its finalizer when it migrated: the deletion touches nothing outside the seed.
			if err := c.Ext.Destroy(ctx, ext); err != nil {
				return 0, err
			}
		case ext.Annotations[extensionsv1alpha1.AnnotationOperation] != extensionsv1alpha1.OperationMigrate:
			if _, err := c.Ext.Annotate(ctx, ext, extensionsv1alpha1.OperationMigrate); err != nil {
				return 0, err
			}
			c.log.Info("migrating the extension BackupEntry", "backupEntry", hubobject.Key(e), "destination", e.GetSpec().GetSeedName())
		}
		return c.cfg.PollInterval, nil
	}
	if err := c.deleteSeedSecret(ctx, e.GetMetadata().GetName()); err != nil {
		return 0, err
	}
	if _, err := c.report(ctx, e, succeeded(opMigrate), map[string]any{"seedName": nil}); err != nil {
		return 0, err
	}
	c.log.Info("BackupEntry migrated", "backupEntry", hubobject.Key(e), "destination", e.GetSpec().GetSeedName())
	return 0, nil
}

// delete deletes the extension BackupEntry (the extension deletes the backups), waits until it is gone, deletes the
// seed's copy of the secret and removes the finalizer so that the hub deletes the core entry. Gardener's
// deletionGracePeriodHours (keep the backups of a deleted shoot for a while) is not implemented: deletion starts at
// once, as with Gardener's default of 0.
func (c *Controller) delete(ctx context.Context, e *corev1beta1.BackupEntry) (time.Duration, error) {
	if !slices.Contains(e.GetMetadata().GetFinalizers(), FinalizerGardener) {
		return 0, nil
	}
	e, err := c.report(ctx, e, processing(opDelete), nil)
	if err != nil {
		return 0, err
	}
	// The extension needs the secret to delete the backups: refresh it while the hub still has it.
	if st, err := c.dependencies(e); err == nil {
		if err := c.ensureGardenNamespace(ctx); err != nil {
			return 0, err
		}
		if _, err := c.ensureSeedSecret(ctx, e.GetMetadata().GetName(), st.secret.GetData()); err != nil {
			return 0, err
		}
	}
	ext := &extensionsv1alpha1.BackupEntry{ObjectMeta: k8smetav1.ObjectMeta{Name: e.GetMetadata().GetName()}}
	if err := c.Ext.Destroy(ctx, ext); err != nil {
		return 0, err
	}
	err = c.cfg.Seed.Get(ctx, client.ObjectKeyFromObject(ext), ext)
	switch {
	case err == nil:
		if le := ext.Status.LastError; le != nil {
			_, rerr := c.report(ctx, e, hubobject.Failed(opDelete, hubobject.ExtensionLastError(le)), nil)
			return c.cfg.PollInterval, rerr
		}
		return c.cfg.PollInterval, nil
	case !apierrors.IsNotFound(err):
		return 0, fmt.Errorf("read %s: %w", extension.Describe(ext), err)
	}
	if err := c.deleteSeedSecret(ctx, e.GetMetadata().GetName()); err != nil {
		return 0, err
	}
	if e, err = c.report(ctx, e, succeeded(opDelete), nil); err != nil {
		return 0, err
	}
	if _, err := c.Objects.RemoveFinalizer(ctx, e, FinalizerGardener); err != nil && status.Code(err) != codes.NotFound {
		return 0, err
	}
	c.log.Info("BackupEntry deleted", "backupEntry", hubobject.Key(e))
	return 0, nil
}

// waiting says why an entry cannot be worked on yet (its bucket is not ready).
type waiting struct{ reason string }

func (w *waiting) Error() string { return w.reason }

// dependencies finds the entry's bucket and the bucket's secret in the agent's cache. A bucket that is not ready
// yet gives a *waiting.
func (c *Controller) dependencies(e *corev1beta1.BackupEntry) (*entryState, error) {
	name := e.GetSpec().GetBucketName()
	b, ok := cache.Get[*corev1beta1.BackupBucket](c.cfg.Cache, resources.BackupBuckets, "", name)
	if !ok {
		return nil, &waiting{fmt.Sprintf("BackupBucket %q is not known to the agent yet", name)}
	}
	bs := b.GetStatus()
	switch lo := bs.GetLastOperation(); {
	case bs.GetLastError() != nil:
		return nil, &waiting{fmt.Sprintf("associated BackupBucket %q is not ready yet: %s", name, bs.GetLastError().GetDescription())}
	case lo.GetState() != hubobject.StateSucceeded || bs.GetObservedGeneration() != b.GetMetadata().GetGeneration():
		return nil, &waiting{fmt.Sprintf("associated BackupBucket %q is not ready yet", name)}
	}
	ns, sname := bucketSecret(b)
	s, ok := cache.Get[*kcorev1.Secret](c.cfg.Cache, resources.Secrets, ns, sname)
	if !ok {
		return nil, fmt.Errorf("secret %s/%s of BackupBucket %q is not known to the agent yet", ns, sname, name)
	}
	return &entryState{e: e, bucket: b, secret: s}, nil
}

// reportProblem reports err, a problem before the extension is involved, on the entry.
func (c *Controller) reportProblem(ctx context.Context, e *corev1beta1.BackupEntry, typ string, err error) {
	o := hubobject.Failed(typ, hubobject.ErrorOf(err))
	if errors.As(err, new(*waiting)) {
		o = hubobject.Processing(typ, err.Error())
	}
	if _, rerr := c.report(ctx, e, o, nil); rerr != nil {
		c.log.Warn("could not report on the BackupEntry", "backupEntry", hubobject.Key(e), "err", rerr)
	}
}

// bucketSecret names the secret entries of bucket b use: the secret the extension generated for the bucket, or the
// bucket's credentials before there is one.
func bucketSecret(b *corev1beta1.BackupBucket) (string, string) {
	if r := b.GetStatus().GetGeneratedSecretRef(); r.GetName() != "" {
		return r.GetNamespace(), r.GetName()
	}
	r := b.GetSpec().GetCredentialsRef()
	return r.GetNamespace(), r.GetName()
}

// ensureGardenNamespace creates the seed's garden namespace, where the entry secrets live, if it is missing.
func (c *Controller) ensureGardenNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: k8smetav1.ObjectMeta{Name: GardenNamespace}}
	if err := c.cfg.Seed.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s in the seed: %w", GardenNamespace, err)
	}
	return nil
}

// ensureSeedSecret keeps the copy of the bucket's secret for an entry in the seed (garden/entry-<name>) and reports
// whether it changed an existing one.
func (c *Controller) ensureSeedSecret(ctx context.Context, entry string, data map[string][]byte) (bool, error) {
	sec := &corev1.Secret{ObjectMeta: k8smetav1.ObjectMeta{Namespace: GardenNamespace, Name: SeedSecretPrefix + entry}}
	err := c.cfg.Seed.Get(ctx, client.ObjectKeyFromObject(sec), sec)
	switch {
	case apierrors.IsNotFound(err):
		sec.Data = data
		if err := c.cfg.Seed.Create(ctx, sec); err != nil {
			return false, fmt.Errorf("create secret %s/%s in the seed: %w", sec.Namespace, sec.Name, err)
		}
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read secret %s/%s in the seed: %w", sec.Namespace, sec.Name, err)
	case maps.EqualFunc(sec.Data, data, func(a, b []byte) bool { return string(a) == string(b) }):
		return false, nil
	}
	sec.Data = data
	if err := c.cfg.Seed.Update(ctx, sec); err != nil {
		return false, fmt.Errorf("update secret %s/%s in the seed: %w", sec.Namespace, sec.Name, err)
	}
	return true, nil
}

func (c *Controller) deleteSeedSecret(ctx context.Context, entry string) error {
	sec := &corev1.Secret{ObjectMeta: k8smetav1.ObjectMeta{Namespace: GardenNamespace, Name: SeedSecretPrefix + entry}}
	if err := c.cfg.Seed.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete secret %s/%s in the seed: %w", sec.Namespace, sec.Name, err)
	}
	return nil
}

// desiredSpec is the extension BackupEntry's spec for an entry in bucket st.bucket.
func desiredSpec(st *entryState) extensionsv1alpha1.BackupEntrySpec {
	b := st.bucket
	return extensionsv1alpha1.BackupEntrySpec{
		DefaultSpec:                extensionsv1alpha1.DefaultSpec{Type: b.GetSpec().GetProvider().GetType(), ProviderConfig: extension.RawExtension(b.GetSpec().GetProviderConfig())},
		Region:                     b.GetSpec().GetProvider().GetRegion(),
		BucketName:                 b.GetMetadata().GetName(),
		SecretRef:                  corev1.SecretReference{Namespace: GardenNamespace, Name: SeedSecretPrefix + st.e.GetMetadata().GetName()},
		BackupBucketProviderStatus: extension.RawExtension(b.GetStatus().GetProviderStatus()),
	}
}

func sameSpec(a, b extensionsv1alpha1.BackupEntrySpec) bool {
	return a.Type == b.Type && a.Class == nil && a.Region == b.Region && a.BucketName == b.BucketName && a.SecretRef == b.SecretRef &&
		extension.SameJSON(a.ProviderConfig, b.ProviderConfig) && extension.SameJSON(a.BackupBucketProviderStatus, b.BackupBucketProviderStatus)
}

// ownerShoot is the name of the Shoot among an object's owner references ("" if none): the shoot of a BackupEntry.
func ownerShoot(md *metav1.ObjectMeta) string {
	for _, r := range md.GetOwnerReferences() {
		if group, _, _ := strings.Cut(r.GetApiVersion(), "/"); group == "core.gardener.cloud" && r.GetKind() == "Shoot" {
			return r.GetName()
		}
	}
	return ""
}
