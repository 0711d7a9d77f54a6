package bastion

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
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8smetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/extension"
	"github.com/trellis-dev/trellis/agent/hubobject"
	"github.com/trellis-dev/trellis/agent/shoot"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Names, as Gardener spells them.
const (
	// FinalizerGardener guards a Bastion on the hub until its extension object is gone.
	FinalizerGardener = "gardener"
	// ConditionReady is the Bastion's readiness condition.
	ConditionReady = "BastionReady"
	// AnnotationForceDeletion on a Bastion is passed on to its extension object.
	AnnotationForceDeletion = "confirmation.gardener.cloud/force-deletion"
)

// sync decides what the bastion key needs and does it; it returns when to look again.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name := hubobject.SplitKey(key)
	cached, ok := cache.Get[*operationsv1alpha1.Bastion](c.cfg.Cache, resources.Bastions, ns, name)
	b, ok := c.Objects.Pick(key, cached, ok)
	if !ok || b.GetSpec().GetSeedName() != c.cfg.SeedName {
		return 0, nil
	}
	s, _ := cache.Get[*corev1beta1.Shoot](c.cfg.Cache, resources.Shoots, ns, b.GetSpec().GetShootRef().GetName())
	ext := &extensionsv1alpha1.Bastion{ObjectMeta: k8smetav1.ObjectMeta{Namespace: c.technicalID(ns, b.GetSpec().GetShootRef().GetName(), s), Name: name}}
	switch {
	case b.GetMetadata().GetDeletionTimestamp() != nil:
		return c.cleanup(ctx, b, ext)
	case expired(b, c.cfg.Now()):
		return c.expire(ctx, b, ext)
	}
	return c.reconcile(ctx, b, s, ext)
}

// technicalID is the namespace of a shoot's control plane in the seed: its status.technicalID, or Gardener's
// shoot--<project>--<name> before it has one.
func (c *Controller) technicalID(namespace, name string, s *corev1beta1.Shoot) string {
	if id := s.GetStatus().GetTechnicalId(); id != "" {
		return id
	}
	project := namespace
	if p, ok := strings.CutPrefix(namespace, "garden-"); ok && p != "" {
		project = p
	}
	for _, p := range cache.List[*corev1beta1.Project](c.cfg.Cache, resources.Projects) {
		if p.GetSpec().GetNamespace() == namespace {
			project = p.GetMetadata().GetName()
			break
		}
	}
	return shoot.TechnicalID(project, name)
}

func expired(b *operationsv1alpha1.Bastion, now time.Time) bool {
	exp := b.GetStatus().GetExpirationTimestamp()
	return exp != nil && !now.Before(exp.AsTime())
}

// reconcile makes the extension Bastion in the shoot's control-plane namespace match the core one, in Gardener's
// way: it is written with the reconcile annotation when it is missing, its spec changed or its last operation
// Failed; once the extension reports it ready, the core Bastion gets BastionReady=True, the extension's ingress
// and observedGeneration. An error of the extension makes BastionReady False.
func (c *Controller) reconcile(ctx context.Context, b *operationsv1alpha1.Bastion, s *corev1beta1.Shoot, ext *extensionsv1alpha1.Bastion) (time.Duration, error) {
	key := hubobject.Key(b)
	b, err := c.Objects.Update(ctx, b, addFinalizer)
	if err != nil {
		return 0, err
	}
	if s == nil {
		err := fmt.Errorf("shoot %s/%s is not known to the agent", b.GetMetadata().GetNamespace(), b.GetSpec().GetShootRef().GetName())
		c.setReady(ctx, b, "False", "FailedReconciling", err.Error(), nil)
		return 0, err
	}
	typ := b.GetSpec().GetProviderType()
	if typ == "" {
		typ = s.GetSpec().GetProvider().GetType()
	}
	spec := extensionsv1alpha1.BastionSpec{
		DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: typ},
		UserData:    userData(b.GetSpec().GetSshPublicKey()),
	}
	for _, in := range b.GetSpec().GetIngress() {
		spec.Ingress = append(spec.Ingress, extensionsv1alpha1.BastionIngressPolicy{
			IPBlock: networkingv1.IPBlock{CIDR: in.GetIpBlock().GetCidr(), Except: in.GetIpBlock().GetExcept()}})
	}

	err = c.cfg.Seed.Get(ctx, client.ObjectKeyFromObject(ext), ext)
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("read %s: %w", extension.Describe(ext), err)
	}
	var why string
	switch {
	case apierrors.IsNotFound(err):
		why = "created"
	case !apiequality.Semantic.DeepEqual(ext.Spec, spec):
		why = "spec changed"
	default:
		why = extension.Rerequest(ext, c.cfg.Now())
	}
	if why != "" {
		if _, err := c.Ext.Deploy(ctx, ext, extensionsv1alpha1.OperationReconcile, func() { ext.Spec = spec }); err != nil {
			if extension.Raced(err) {
				return c.cfg.PollInterval, nil
			}
			c.setReady(ctx, b, "False", "FailedReconciling", err.Error(), nil)
			return 0, fmt.Errorf("failed to ensure the bastion's extension object: %w", err)
		}
		c.log.Info("deployed the extension Bastion", "bastion", key, "namespace", ext.Namespace, "reason", why)
		return c.cfg.PollInterval, nil
	}
	switch err := extension.CheckReady(ext, ""); {
	case errors.As(err, new(*extension.CodedError)):
		c.setReady(ctx, b, "False", "FailedReconciling",
			fmt.Sprintf("Error while waiting for %s to become ready: %v", extension.Describe(ext), err), nil)
		return c.cfg.PollInterval, nil
	case err != nil:
		return c.cfg.PollInterval, nil
	}
	extra := map[string]any{"ingress": nil}
	if in := ext.Status.Ingress; in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		extra["ingress"] = json.RawMessage(raw)
	}
	if b.GetStatus().GetObservedGeneration() != b.GetMetadata().GetGeneration() {
		extra["observedGeneration"] = b.GetMetadata().GetGeneration()
	}
	if !sameIngress(b.GetStatus().GetIngress(), extra["ingress"]) || extra["observedGeneration"] != nil ||
		!hasCondition(b, ConditionReady, "True", "SuccessfullyReconciled") {
		c.setReady(ctx, b, "True", "SuccessfullyReconciled", "The bastion has been reconciled successfully.", extra)
	}
	after := c.cfg.SyncPeriod
	if exp := b.GetStatus().GetExpirationTimestamp(); exp != nil {
		after = min(after, exp.AsTime().Sub(c.cfg.Now())+time.Millisecond)
	}
	return after, nil
}

// expire removes the extension object of a bastion whose expirationTimestamp passed (the hub deletes the Bastion
// itself) and makes it not Ready; the finalizer stays until the Bastion is deleted.
func (c *Controller) expire(ctx context.Context, b *operationsv1alpha1.Bastion, ext *extensionsv1alpha1.Bastion) (time.Duration, error) {
	gone, err := c.destroy(ctx, b, ext)
	if err != nil || !gone {
		return c.cfg.PollInterval, err
	}
	msg := "The bastion expired at " + b.GetStatus().GetExpirationTimestamp().AsTime().UTC().Format(time.RFC3339) + "."
	if !hasCondition(b, ConditionReady, "False", "Expired") {
		c.setReady(ctx, b, "False", "Expired", msg, map[string]any{"ingress": nil})
	}
	return 0, nil
}

// cleanup deletes the extension object of a deleted Bastion and removes the finalizer once it is gone.
func (c *Controller) cleanup(ctx context.Context, b *operationsv1alpha1.Bastion, ext *extensionsv1alpha1.Bastion) (time.Duration, error) {
	if !slices.Contains(b.GetMetadata().GetFinalizers(), FinalizerGardener) {
		return 0, nil
	}
	if !hasCondition(b, ConditionReady, "False", "DeletionInProgress") {
		c.setReady(ctx, b, "False", "DeletionInProgress", "The bastion is being deleted.", nil)
	}
	gone, err := c.destroy(ctx, b, ext)
	if err != nil || !gone {
		return c.cfg.PollInterval, err
	}
	if _, err := c.Objects.RemoveFinalizer(ctx, b, FinalizerGardener); err != nil && status.Code(err) != codes.NotFound {
		return 0, err
	}
	c.log.Info("Bastion deleted", "bastion", hubobject.Key(b))
	return 0, nil
}

// destroy deletes the extension object, passing on the Bastion's force-deletion confirmation, and reports whether it
// is gone.
func (c *Controller) destroy(ctx context.Context, b *operationsv1alpha1.Bastion, ext *extensionsv1alpha1.Bastion) (bool, error) {
	if b.GetMetadata().GetAnnotations()[AnnotationForceDeletion] == "true" {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, AnnotationForceDeletion)
		if err := c.cfg.Seed.Patch(ctx, ext, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("annotate %s for force deletion: %w", extension.Describe(ext), err)
		}
	}
	if err := c.Ext.Destroy(ctx, ext); err != nil {
		return false, err
	}
	err := c.cfg.Seed.Get(ctx, client.ObjectKeyFromObject(ext), ext)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read %s: %w", extension.Describe(ext), err)
	}
	return false, nil
}

// userData is the bastion's user data: a script that creates the user gardener with the SSH key as its only
// authorized key and password-less sudo, and starts sshd, as Gardener's does. The extension passes it to the
// machine; JSON carries it base64-encoded.
func userData(sshPublicKey string) []byte {
	quoted := "'" + strings.ReplaceAll(strings.TrimSpace(sshPublicKey), "'", `'\''`) + "'"
	return []byte(`#!/bin/bash -eu
id gardener >/dev/null 2>&1 || useradd --create-home --user-group gardener
install -d -m 0700 -o gardener -g gardener /home/gardener/.ssh
printf '%s\n' ` + quoted + ` > /home/gardener/.ssh/authorized_keys
chown gardener:gardener /home/gardener/.ssh/authorized_keys
chmod 0600 /home/gardener/.ssh/authorized_keys
echo "gardener ALL=(ALL) NOPASSWD:ALL" > /etc/sudoers.d/99-gardener-user
systemctl start ssh
`)
}

// setReady sets the BastionReady condition (and the further status fields in extra) on the hub; failures are logged,
// the next sync tries again.
func (c *Controller) setReady(ctx context.Context, b *operationsv1alpha1.Bastion, st, reason, message string, extra map[string]any) {
	now := timestamppb.New(c.cfg.Now().UTC().Truncate(time.Second))
	conds := slices.Clone(b.GetStatus().GetConditions())
	i := slices.IndexFunc(conds, func(x *metav1.Condition) bool { return x.GetType() == ConditionReady })
	if i >= 0 && len(extra) == 0 && conds[i].GetStatus() == st && conds[i].GetReason() == reason && conds[i].GetMessage() == message {
		return // says so already
	}
	cond := &metav1.Condition{Type: ConditionReady, Status: st, Reason: reason, Message: message, LastTransitionTime: now, LastUpdateTime: now}
	if i >= 0 {
		if old := conds[i]; old.GetStatus() == st && old.GetLastTransitionTime() != nil {
			cond.LastTransitionTime = old.GetLastTransitionTime()
		}
		conds[i] = cond
	} else {
		conds = append(conds, cond)
	}
	items := make([]json.RawMessage, len(conds))
	for i, c := range conds {
		items[i] = hubobject.JSON(c)
	}
	p := map[string]any{"conditions": items}
	maps.Copy(p, extra)
	if _, err := c.Objects.PatchStatus(ctx, b, p); err != nil {
		c.log.Warn("could not update the Bastion's status", "bastion", hubobject.Key(b), "err", err)
	}
}

func hasCondition(b *operationsv1alpha1.Bastion, typ, st, reason string) bool {
	return slices.ContainsFunc(b.GetStatus().GetConditions(), func(c *metav1.Condition) bool {
		return c.GetType() == typ && c.GetStatus() == st && c.GetReason() == reason
	})
}

// sameIngress compares the core Bastion's ingress with the JSON the extension reports (nil: none).
func sameIngress(cur *operationsv1alpha1.LoadBalancerIngress, want any) bool {
	raw, ok := want.(json.RawMessage)
	if !ok {
		return cur == nil
	}
	w := &operationsv1alpha1.LoadBalancerIngress{}
	if err := kjson.Unmarshal(raw, w); err != nil {
		return false
	}
	return proto.Equal(cur, w)
}

// addFinalizer adds the finalizer to a bastion that is not being deleted.
func addFinalizer(b *operationsv1alpha1.Bastion) bool {
	if slices.Contains(b.Metadata.Finalizers, FinalizerGardener) || b.Metadata.DeletionTimestamp != nil {
		return false
	}
	b.Metadata.Finalizers = append(b.Metadata.Finalizers, FinalizerGardener)
	return true
}
