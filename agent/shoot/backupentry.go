package shoot

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/extension"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// backupEntryName is Gardener's name of a shoot's BackupEntry: "<technical ID>--<shoot UID>".
func (op *operation) backupEntryName() string {
	return op.ns + "--" + op.shoot.GetMetadata().GetUid()
}

// deployBackupEntry creates the shoot's core BackupEntry on the hub (in the bucket of the seed, named after the
// seed's UID as gardenlet names it), moves it to this seed after a migration, and waits until the seed's backup
// entry controller reports it reconciled.
func (op *operation) deployBackupEntry(ctx context.Context) error {
	c := op.c
	md := op.shoot.GetMetadata()
	name := op.backupEntryName()
	// Create first: one round trip for a new shoot; an existing entry (a retry, a migrated shoot) is read after.
	be := &corev1beta1.BackupEntry{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "BackupEntry",
		Metadata: &metav1.ObjectMeta{Namespace: md.GetNamespace(), Name: name,
			Labels:          map[string]string{"gardener.cloud/role": "shoot"},
			OwnerReferences: []*metav1.OwnerReference{{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot", Name: md.GetName(), Uid: md.GetUid(), Controller: proto.Bool(true)}}},
		Spec: &corev1beta1.BackupEntrySpec{BucketName: op.seed.GetMetadata().GetUid(), SeedName: proto.String(c.cfg.SeedName)}}
	hctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	_, err := c.entries.Create(hctx, be)
	cancel()
	switch status.Code(err) {
	case codes.OK:
	case codes.AlreadyExists:
		hctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
		cur, err := c.entries.Get(hctx, &metav1.GetRequest{Namespace: md.GetNamespace(), Name: name})
		cancel()
		if err != nil {
			return fmt.Errorf("read BackupEntry %s/%s: %w", md.GetNamespace(), name, err)
		}
		if cur.GetSpec().GetSeedName() != c.cfg.SeedName {
			// The shoot was migrated here: its entry (and its backups) move with it, the bucket stays.
			cur.Spec.SeedName = proto.String(c.cfg.SeedName)
			hctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
			_, err = c.entries.Update(hctx, cur)
			cancel()
			if err != nil {
				return fmt.Errorf("move BackupEntry %s/%s to seed %s: %w", md.GetNamespace(), name, c.cfg.SeedName, err)
			}
		}
	default:
		return fmt.Errorf("create BackupEntry %s/%s: %w", md.GetNamespace(), name, err)
	}
	be, ok := cache.Get[*corev1beta1.BackupEntry](c.cfg.Cache, resources.BackupEntries, md.GetNamespace(), name)
	if !ok {
		return fmt.Errorf("BackupEntry %s/%s has not reached the agent yet", md.GetNamespace(), name)
	}
	lo := be.GetStatus().GetLastOperation()
	if be.GetStatus().GetObservedGeneration() != be.GetMetadata().GetGeneration() || lo.GetState() != stateSucceeded {
		if le := be.GetStatus().GetLastError(); le != nil {
			return extension.WithCodes(fmt.Errorf("BackupEntry %s/%s: %s", md.GetNamespace(), name, le.GetDescription()), le.GetCodes()...)
		}
		return fmt.Errorf("BackupEntry %s/%s is not reconciled yet (%s %s)", md.GetNamespace(), name, lo.GetType(), lo.GetState())
	}
	return nil
}

// destroyBackupEntry deletes the shoot's core BackupEntry; the seed's backup entry controller then deletes the
// extension object (and the backups, as Gardener does once the retention grace period passed).
func (op *operation) destroyBackupEntry(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, op.c.cfg.HubTimeout)
	defer cancel()
	_, err := op.c.entries.Delete(ctx, &metav1.DeleteRequest{Namespace: op.shoot.GetMetadata().GetNamespace(), Name: op.backupEntryName()})
	if err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("delete BackupEntry %s: %w", op.backupEntryName(), err)
	}
	return nil
}

// hubPollInterval is how often the flow looks again at a hub object another controller works on (the BackupEntry).
const hubPollInterval = 250 * time.Millisecond
