package admission_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/auth"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
)

const sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKMjf4u7l0qTQbW0zDiYpbf7gVfxWcdxDkPo0Pqs3YgR you@example.com"

func validBastion() *operationsv1alpha1.Bastion {
	return &operationsv1alpha1.Bastion{
		Metadata: meta("debug", "garden-dev"),
		Spec: &operationsv1alpha1.BastionSpec{
			ShootRef:     &metav1.LocalObjectReference{Name: "crazy-botany"},
			SshPublicKey: sshKey,
			Ingress:      []*operationsv1alpha1.BastionIngressPolicy{{IpBlock: &operationsv1alpha1.IPBlock{Cidr: "1.2.3.4/32"}}},
		},
	}
}

// bastionShoot is a shoot in garden-dev with one worker pool, scheduled to seed (unscheduled when seed is "").
func bastionShoot(name, seed string, f ...func(*corev1beta1.Shoot)) example {
	s := &corev1beta1.Shoot{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: name, Uid: "uid-" + name},
		Spec: &corev1beta1.ShootSpec{Provider: &corev1beta1.Provider{Type: "aws", Workers: []*corev1beta1.Worker{{Name: "w1"}}}}}
	if seed != "" {
		s.Spec.SeedName = proto.String(seed)
	}
	for _, m := range f {
		m(s)
	}
	return example{name: name, gr: schema.GroupResource{Group: "core.gardener.cloud", Resource: "shoots"}, obj: s}
}

func sshAccess(enabled *bool) func(*corev1beta1.Shoot) {
	return func(s *corev1beta1.Shoot) {
		s.Spec.Provider.WorkersSettings = &corev1beta1.WorkersSettings{SshAccess: &corev1beta1.SSHAccess{Enabled: enabled}}
	}
}

// bastionShoots are the shoots the Bastions of the tests name.
var bastionShoots = exampleReader{
	bastionShoot("crazy-botany", "aws-1"),
	bastionShoot("example-shoot", "aws-1"), // the one Gardener's example Bastion names
	bastionShoot("unscheduled", ""),
	bastionShoot("deleting", "aws-1", func(s *corev1beta1.Shoot) { s.Metadata.DeletionTimestamp = timestamppb.Now() }),
	bastionShoot("ssh-disabled", "aws-1", sshAccess(proto.Bool(false))),
	bastionShoot("ssh-enabled", "aws-1", sshAccess(proto.Bool(true))),
	bastionShoot("ssh-default", "aws-1", sshAccess(nil)),
	bastionShoot("workerless", "aws-1", func(s *corev1beta1.Shoot) { s.Spec.Provider.Workers = nil }),
	bastionShoot("moved", "gcp-1", func(s *corev1beta1.Shoot) { s.Spec.Provider.Type = "gcp" }),
}

// bastionCase is a validationCase whose Bastion is admitted against bastionShoots; when the Bastion is admitted,
// its spec.seedName and spec.providerType must be seed and provider ("aws-1" and "aws" when empty).
type bastionCase struct {
	validationCase
	seed, provider string
}

func TestBastionValidation(t *testing.T) {
	b := func(f func(*operationsv1alpha1.Bastion)) *operationsv1alpha1.Bastion { return with(validBastion(), f) }
	shootRef := func(name string) *operationsv1alpha1.Bastion {
		return b(func(x *operationsv1alpha1.Bastion) { x.Spec.ShootRef.Name = name })
	}
	deleting := func(x *operationsv1alpha1.Bastion) *operationsv1alpha1.Bastion {
		x.Metadata.DeletionTimestamp = timestamppb.Now()
		return x
	}
	withSeed := func(x *operationsv1alpha1.Bastion, seed, provider string) *operationsv1alpha1.Bastion {
		x.Spec.SeedName, x.Spec.ProviderType = proto.String(seed), proto.String(provider)
		return x
	}
	createdBy := func(x *operationsv1alpha1.Bastion, user string) *operationsv1alpha1.Bastion {
		x.Metadata.Annotations = map[string]string{admission.AnnotationCreatedBy: user}
		return x
	}
	cases := []bastionCase{
		{validationCase: validationCase{name: "valid", obj: validBastion()}},
		{validationCase: validationCase{name: "example", obj: examplesOf(t, &operationsv1alpha1.Bastion{})[0]}},
		{validationCase: validationCase{name: "empty", obj: &operationsv1alpha1.Bastion{Metadata: meta("b", "garden-dev")},
			paths: []string{"spec.ingress", "spec.shootRef.name", "spec.sshPublicKey"}}},
		{validationCase: validationCase{name: "key must parse", obj: b(func(x *operationsv1alpha1.Bastion) { x.Spec.SshPublicKey = "ssh-rsa not-base64" }),
			paths: []string{"spec.sshPublicKey"}}},
		{validationCase: validationCase{name: "ingress CIDRs", obj: b(func(x *operationsv1alpha1.Bastion) {
			x.Spec.Ingress = append(x.Spec.Ingress,
				&operationsv1alpha1.BastionIngressPolicy{IpBlock: &operationsv1alpha1.IPBlock{Cidr: "1.2.3.4"}},
				&operationsv1alpha1.BastionIngressPolicy{IpBlock: &operationsv1alpha1.IPBlock{Cidr: "2001:db8::/64"}},
				&operationsv1alpha1.BastionIngressPolicy{},
			)
		}), paths: []string{"spec.ingress[1].ipBlock.cidr", "spec.ingress[3].ipBlock.cidr"}}},
		{validationCase: validationCase{name: "shoot and key are immutable", old: validBastion(), obj: b(func(x *operationsv1alpha1.Bastion) {
			x.Spec.ShootRef.Name = "other"
			x.Spec.SshPublicKey = examplesOf(t, &operationsv1alpha1.Bastion{})[0].(*operationsv1alpha1.Bastion).Spec.SshPublicKey
		}), paths: []string{"spec.shootRef.name", "spec.sshPublicKey"}}},
		{validationCase: validationCase{name: "ingress may change", old: validBastion(), obj: b(func(x *operationsv1alpha1.Bastion) {
			x.Spec.Ingress[0].IpBlock.Cidr = "5.6.7.8/32"
		})}},
		{validationCase: validationCase{name: "created-by is immutable", old: createdBy(validBastion(), "alice"), obj: createdBy(validBastion(), "mallory"),
			paths: []string{"metadata.annotations[gardener.cloud/created-by]"}}},
		{validationCase: validationCase{name: "created-by may not be removed", old: createdBy(validBastion(), "alice"), obj: validBastion(),
			paths: []string{"metadata.annotations[gardener.cloud/created-by]"}}},

		// Gardener's Bastion admission: the shoot, in the Bastion's namespace, must exist, be alive (on create),
		// scheduled, and allow SSH to its workers.
		{validationCase: validationCase{name: "shoot not found", obj: shootRef("nope"), paths: []string{"spec.shootRef.name"}}},
		{validationCase: validationCase{name: "shoot of another namespace", obj: b(func(x *operationsv1alpha1.Bastion) { x.Metadata.Namespace = "garden-other" }),
			paths: []string{"spec.shootRef.name"}}},
		{validationCase: validationCase{name: "shoot not scheduled", obj: shootRef("unscheduled"), paths: []string{"spec.shootRef.name"}}},
		{validationCase: validationCase{name: "shoot in deletion", obj: shootRef("deleting"), paths: []string{"spec.shootRef.name"}}},
		{validationCase: validationCase{name: "shoot in deletion: an existing Bastion may change", old: shootRef("deleting"), obj: shootRef("deleting")}},
		{validationCase: validationCase{name: "ssh access disabled", obj: shootRef("ssh-disabled"), paths: []string{"spec.shootRef.name"}}},
		{validationCase: validationCase{name: "ssh access disabled: on update too", old: shootRef("ssh-disabled"), obj: shootRef("ssh-disabled"),
			paths: []string{"spec.shootRef.name"}}},
		{validationCase: validationCase{name: "ssh access disabled: a Bastion in deletion is not held up", old: shootRef("ssh-disabled"),
			obj: deleting(shootRef("ssh-disabled"))}},
		{validationCase: validationCase{name: "ssh access enabled", obj: shootRef("ssh-enabled")}},
		{validationCase: validationCase{name: "ssh access without enabled defaults to enabled", obj: shootRef("ssh-default")}},
		{validationCase: validationCase{name: "workerless shoot", obj: shootRef("workerless"), paths: []string{"spec.shootRef.name"}}},

		// spec.seedName and spec.providerType are the shoot's, whatever the request says.
		{validationCase: validationCase{name: "seed and provider of the request are overwritten", obj: withSeed(validBastion(), "mine", "mine")}},
		{validationCase: validationCase{name: "seed and provider follow the shoot on update", old: withSeed(shootRef("moved"), "aws-1", "aws"),
			obj: withSeed(shootRef("moved"), "aws-1", "aws")}, seed: "gcp-1", provider: "gcp"},
		// A Bastion being deleted is not checked against its shoot (which may be gone) and keeps its seed.
		{validationCase: validationCase{name: "a Bastion in deletion keeps its seed, its shoot gone", old: deleting(withSeed(shootRef("gone"), "aws-2", "aws")),
			obj: shootRef("gone")}, seed: "aws-2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := validateWith(t, bastionShoots, c.obj, c.old)
			want := slices.Clone(c.paths)
			slices.Sort(want)
			if got := errorPaths(errs); !slices.Equal(got, want) {
				t.Fatalf("error paths:\n got  %q\n want %q\nerrors: %v", got, want, errs)
			}
			if len(c.paths) > 0 || c.obj.(*operationsv1alpha1.Bastion).GetSpec().GetShootRef().GetName() == "" {
				return
			}
			seed, provider := c.seed, c.provider
			if seed == "" {
				seed = "aws-1"
			}
			if provider == "" {
				provider = "aws"
			}
			spec := c.obj.(*operationsv1alpha1.Bastion).GetSpec()
			if spec.GetSeedName() != seed || spec.GetProviderType() != provider {
				t.Errorf("admitted with spec.seedName %q, spec.providerType %q; want %q, %q", spec.GetSeedName(), spec.GetProviderType(), seed, provider)
			}
		})
	}
}

// TestBastionOwner: an admitted Bastion is controlled by its shoot; a reference to the same shoot (by UID) is
// replaced, other owners stay.
func TestBastionOwner(t *testing.T) {
	want := &metav1.OwnerReference{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot", Name: "crazy-botany", Uid: "uid-crazy-botany",
		Controller: proto.Bool(true), BlockOwnerDeletion: proto.Bool(true)}
	other := &metav1.OwnerReference{ApiVersion: "v1", Kind: "ConfigMap", Name: "x", Uid: "uid-x"}
	b := validBastion()
	b.Metadata.OwnerReferences = []*metav1.OwnerReference{other, {ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot", Name: "stale", Uid: "uid-crazy-botany"}}
	if errs := validateWith(t, bastionShoots, b, nil); len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := b.GetMetadata().GetOwnerReferences(); len(got) != 2 || !proto.Equal(got[0], other) || !proto.Equal(got[1], want) {
		t.Errorf("owner references %v, want [%v %v]", got, other, want)
	}
	b = validBastion()
	if errs := validateWith(t, bastionShoots, b, nil); len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := b.GetMetadata().GetOwnerReferences(); len(got) != 1 || !proto.Equal(got[0], want) {
		t.Errorf("owner references %v, want [%v]", got, want)
	}
}

// TestBastionPrepareCreate: on create the hub records the requesting user in gardener.cloud/created-by (over
// whatever the request said) and starts the heartbeat: status.lastHeartbeatTimestamp now, expirationTimestamp an hour
// later (what a request puts in status is not kept).
func TestBastionPrepareCreate(t *testing.T) {
	prepare := plugins.For(&operationsv1alpha1.Bastion{}).PrepareCreate
	if prepare == nil {
		t.Fatal("Bastion has no PrepareCreate")
	}
	b := validBastion()
	b.Metadata.Annotations = map[string]string{admission.AnnotationCreatedBy: "mallory", "keep": "me"}
	b.Status = &operationsv1alpha1.BastionStatus{ExpirationTimestamp: timestamppb.New(time.Now().Add(24 * 365 * time.Hour))}
	before := time.Now().Truncate(time.Second)
	prepare(auth.WithUser(context.Background(), auth.User{Name: "alice@example.com"}), b)
	after := time.Now()
	if got := b.GetMetadata().GetAnnotations(); got[admission.AnnotationCreatedBy] != "alice@example.com" || got["keep"] != "me" {
		t.Errorf("annotations %v: want created-by alice@example.com, keep=me", got)
	}
	hb, exp := b.GetStatus().GetLastHeartbeatTimestamp().AsTime(), b.GetStatus().GetExpirationTimestamp().AsTime()
	if hb.Before(before) || hb.After(after) || hb.Nanosecond() != 0 || exp.Sub(hb) != time.Hour {
		t.Errorf("heartbeat %v (want between %v and %v, whole seconds), expiration %v (want an hour later)", hb, before, after, exp)
	}

	// Without a user (a call inside the hub) there is nobody to record.
	b = validBastion()
	prepare(context.Background(), b)
	if _, ok := b.GetMetadata().GetAnnotations()[admission.AnnotationCreatedBy]; ok {
		t.Errorf("created-by set without a user: %v", b.GetMetadata().GetAnnotations())
	}
}
