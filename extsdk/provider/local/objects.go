package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/extsdk"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Labels on every object provider-local makes, and the field manager of its writes.
const (
	// FieldOwner is the field manager of provider-local's server-side applies.
	FieldOwner = "provider-local"
	// LabelManagedBy is the well-known label, with value FieldOwner.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelKind names the lowercase kind of the extension object an object was made for.
	LabelKind = "provider.local.trellis.dev/kind"
	// LabelName names the extension object an object was made for (shortened with a hash beyond 63 characters).
	LabelName = "provider.local.trellis.dev/name"
)

// seed writes and reads the seed: writes through the manager's client, reads uncached through its API reader, so
// that provider-local caches (and needs list/watch permission for) nothing but the extension kinds.
type seed struct {
	c client.Client
	r client.Reader
}

// applyConfiguration is what seed.apply takes: a client-go apply configuration of a namespaced kind.
type applyConfiguration interface {
	runtime.ApplyConfiguration
	GetNamespace() *string
}

// apply server-side applies ac as FieldOwner, taking over conflicting fields: one round trip whether the object
// exists or not, and no change (no event, no new resourceVersion) when it already matches.
func (s seed) apply(ctx context.Context, ac applyConfiguration) error {
	return s.c.Apply(ctx, ac, client.FieldOwner(FieldOwner), client.ForceOwnership)
}

// applyCreatingNamespace is apply for objects outside shoot namespaces (the seed's garden namespace): a missing
// namespace is created and the apply repeated. Shoot namespaces are never created: they belong to the agent.
func (s seed) applyCreatingNamespace(ctx context.Context, ac applyConfiguration) error {
	err := s.apply(ctx, ac)
	if apierrors.IsNotFound(err) && ac.GetNamespace() != nil {
		if err := s.ensureNamespace(ctx, *ac.GetNamespace()); err != nil {
			return err
		}
		err = s.apply(ctx, ac)
	}
	return err
}

// ensureNamespace creates the namespace name unless it exists.
func (s seed) ensureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelManagedBy: FieldOwner}}}
	if err := s.c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// remove deletes obj (its name and namespace are enough); an object or namespace already gone is fine.
func (s seed) remove(ctx context.Context, obj client.Object) error {
	if err := s.c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// removeAll deletes each of objs, stripping finalizers first when strip is set, and returns the errors joined.
func (s seed) removeAll(ctx context.Context, strip bool, objs ...client.Object) error {
	var errs []error
	for _, o := range objs {
		if strip {
			errs = append(errs, s.stripFinalizers(ctx, o))
		}
		errs = append(errs, s.remove(ctx, o))
	}
	return errors.Join(errs...)
}

// stripFinalizers removes every finalizer of obj; only for objects that provider-local alone puts finalizers on.
func (s seed) stripFinalizers(ctx context.Context, obj client.Object) error {
	if len(obj.GetFinalizers()) == 0 && obj.GetResourceVersion() != "" {
		return nil // read without finalizers
	}
	err := s.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizers of %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// ownerLabels are the labels that tie an object to the extension object of kind (lowercase) and name.
func ownerLabels(kind, name string) map[string]string {
	return map[string]string{LabelManagedBy: FieldOwner, LabelKind: kind, LabelName: labelValue(name)}
}

// labelValue returns name if it is a valid label value by length, else a prefix of it with a hash.
func labelValue(name string) string {
	return shorten(name, 63)
}

// shorten returns s if it has at most maxLen characters, else a prefix of it and a 10-character hash of all of it,
// without a trailing '-' or '.' before the hash, so that a shortened name is still a DNS label.
func shorten(s string, maxLen int) string {
	if len(s) <= maxLen {
		return s
	}
	h := sha256.Sum256([]byte(s))
	prefix := strings.TrimRight(s[:maxLen-11], "-.")
	return prefix + "-" + hex.EncodeToString(h[:])[:10]
}

// checksum returns the first n hex characters of the SHA-256 of parts.
func checksum(n int, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:n]
}

// shootOf returns the Cluster's Shoot; nil without a Cluster (the proto getters accept nil).
func shootOf(cluster *extsdk.Cluster) *corev1beta1.Shoot {
	if cluster == nil {
		return nil
	}
	return cluster.Shoot
}
