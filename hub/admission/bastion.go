package admission

import (
	"context"
	"fmt"
	"net"
	"time"

	"golang.org/x/crypto/ssh"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trellis-dev/trellis/hub/auth"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
)

// AnnotationCreatedBy is Gardener's gardener.cloud/created-by: on a Bastion, the user who created it (whose SSH key
// it lets in). Admission sets it on create from the authenticated user, whatever the request said; it is immutable.
const AnnotationCreatedBy = "gardener.cloud/created-by"

// BastionTimeToLive is how long a Bastion lives past its last heartbeat: on create the hub sets
// status.lastHeartbeatTimestamp to now and status.expirationTimestamp to now plus this, as the gardener-apiserver's
// Bastion strategy does.
const BastionTimeToLive = time.Hour

// prepareBastion records who creates the Bastion (AnnotationCreatedBy) and its first heartbeat and expiry.
func prepareBastion(ctx context.Context, b *operationsv1alpha1.Bastion) {
	if u, ok := auth.UserFrom(ctx); ok && u.Name != "" {
		if b.Metadata == nil {
			b.Metadata = &metav1.ObjectMeta{}
		}
		if b.Metadata.Annotations == nil {
			b.Metadata.Annotations = map[string]string{}
		}
		b.Metadata.Annotations[AnnotationCreatedBy] = u.Name
	}
	now := time.Now().Truncate(time.Second) // timestamps are served with second precision, as metav1.Time's
	b.Status = &operationsv1alpha1.BastionStatus{
		LastHeartbeatTimestamp: timestamppb.New(now),
		ExpirationTimestamp:    timestamppb.New(now.Add(BastionTimeToLive)),
	}
}

// validateBastion checks spec.shootRef.name, spec.sshPublicKey (an authorized_keys line) and spec.ingress (at least
// one entry, each ipBlock.cidr a valid CIDR); the shoot, the key and the created-by annotation are immutable. Then it
// admits the Bastion against its shoot (admitBastion), which fills in spec.seedName and spec.providerType.
func validateBastion(ctx context.Context, r Reader, b, old *operationsv1alpha1.Bastion) field.ErrorList {
	errs := nameIsDNSLabel(b.GetMetadata())
	p := field.NewPath("spec")
	spec := b.GetSpec()
	if spec.GetShootRef().GetName() == "" {
		errs = append(errs, field.Required(p.Child("shootRef", "name"), "shoot reference must not be empty"))
	}
	kp := p.Child("sshPublicKey")
	if spec.GetSshPublicKey() == "" {
		errs = append(errs, field.Required(kp, "sshPublicKey must not be empty"))
	} else if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(spec.GetSshPublicKey())); err != nil {
		errs = append(errs, field.Invalid(kp, spec.GetSshPublicKey(), "invalid sshPublicKey: "+err.Error()))
	}
	ip := p.Child("ingress")
	if len(spec.GetIngress()) == 0 {
		errs = append(errs, field.Required(ip, "ingress must not be empty"))
	}
	for i, in := range spec.GetIngress() {
		cp := ip.Index(i).Child("ipBlock", "cidr")
		c := in.GetIpBlock().GetCidr()
		if c == "" {
			errs = append(errs, field.Required(cp, "CIDR must not be empty"))
		} else if _, _, err := net.ParseCIDR(c); err != nil {
			errs = append(errs, field.Invalid(cp, c, "invalid CIDR"))
		}
	}
	if old != nil {
		errs = append(errs, immutable(p.Child("shootRef", "name"), spec.GetShootRef().GetName(), old.GetSpec().GetShootRef().GetName())...)
		errs = append(errs, immutable(kp, spec.GetSshPublicKey(), old.GetSpec().GetSshPublicKey())...)
		errs = append(errs, immutable(field.NewPath("metadata", "annotations").Key(AnnotationCreatedBy),
			b.GetMetadata().GetAnnotations()[AnnotationCreatedBy], old.GetMetadata().GetAnnotations()[AnnotationCreatedBy])...)
	}
	if len(errs) > 0 || spec.GetShootRef().GetName() == "" {
		return errs
	}
	return admitBastion(ctx, r, b, old)
}

// admitBastion is Gardener's Bastion admission plugin, on create and update: the shoot spec.shootRef.name in the
// Bastion's namespace must exist, must not be in deletion (on create), must be scheduled to a seed, and must allow
// SSH access to its workers (it has workers and spec.provider.workersSettings.sshAccess.enabled is not false) unless
// the Bastion is being deleted. spec.seedName and spec.providerType are then the shoot's, whatever the request
// said, and the shoot becomes the Bastion's controlling owner.
//
// Unlike Gardener's, a write to a Bastion that is being deleted is not checked against the shoot and keeps the
// seed and provider the Bastion has: the hub does not hold a shoot's deletion until its Bastions are gone, so the
// shoot may be gone before the agent removes its finalizer.
func admitBastion(ctx context.Context, r Reader, b, old *operationsv1alpha1.Bastion) field.ErrorList {
	if old != nil && old.GetMetadata().GetDeletionTimestamp() != nil {
		if b.Spec == nil {
			b.Spec = &operationsv1alpha1.BastionSpec{}
		}
		b.Spec.SeedName, b.Spec.ProviderType = old.GetSpec().SeedName, old.GetSpec().ProviderType
		return nil
	}
	p := field.NewPath("spec", "shootRef", "name")
	if b.Metadata == nil {
		b.Metadata = &metav1.ObjectMeta{}
	}
	md := b.Metadata
	name := b.GetSpec().GetShootRef().GetName()
	obj, err := r.Get(ctx, shoots, md.GetNamespace(), name)
	if apierrors.IsNotFound(err) {
		return field.ErrorList{field.Invalid(p, name, fmt.Sprintf("shoot %s/%s not found", md.GetNamespace(), name))}
	}
	if err != nil {
		return field.ErrorList{field.InternalError(p, fmt.Errorf("read shoot %s/%s: %w", md.GetNamespace(), name, err))}
	}
	shoot, ok := obj.(*corev1beta1.Shoot)
	if !ok {
		return field.ErrorList{field.InternalError(p, fmt.Errorf("shoot %s/%s is a %T", md.GetNamespace(), name, obj))}
	}
	switch {
	case old == nil && shoot.GetMetadata().GetDeletionTimestamp() != nil:
		return field.ErrorList{field.Invalid(p, name, "shoot is in deletion")}
	case shoot.GetSpec().GetSeedName() == "":
		return field.ErrorList{field.Invalid(p, name, "shoot is not yet assigned to a seed")}
	case md.GetDeletionTimestamp() == nil && !sshAccessEnabled(shoot):
		return field.ErrorList{field.Invalid(p, name, "ssh access is disabled for worker nodes")}
	}
	b.Spec.SeedName = proto.String(shoot.GetSpec().GetSeedName())
	b.Spec.ProviderType = proto.String(shoot.GetSpec().GetProvider().GetType())
	setControllerOwner(md, shoot)
	return nil
}

// sshAccessEnabled is Gardener's ShootEnablesSSHAccess: the shoot has workers and does not disable SSH access to
// them (spec.provider.workersSettings.sshAccess.enabled defaults to true).
func sshAccessEnabled(s *corev1beta1.Shoot) bool {
	a := s.GetSpec().GetProvider().GetWorkersSettings().GetSshAccess()
	return len(s.GetSpec().GetProvider().GetWorkers()) > 0 && (a == nil || a.Enabled == nil || a.GetEnabled())
}

// setControllerOwner makes shoot the controlling owner of the object of md (so its deletion takes the Bastion with
// it), merging by UID as Gardener's MergeOwnerReferences does: a reference to the same UID is replaced, others stay.
func setControllerOwner(md *metav1.ObjectMeta, shoot *corev1beta1.Shoot) {
	ref := &metav1.OwnerReference{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot", Name: shoot.GetMetadata().GetName(),
		Uid: shoot.GetMetadata().GetUid(), Controller: proto.Bool(true), BlockOwnerDeletion: proto.Bool(true)}
	for i, o := range md.OwnerReferences {
		if o.GetUid() == ref.GetUid() {
			md.OwnerReferences[i] = ref
			return
		}
	}
	md.OwnerReferences = append(md.OwnerReferences, ref)
}
