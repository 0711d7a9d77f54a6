package shoot

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/hub/controller/controllertest"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
)

func quota(name string, days *int32) *corev1beta1.Quota {
	return &corev1beta1.Quota{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: name},
		Spec: &corev1beta1.QuotaSpec{ClusterLifetimeDays: days}}
}

func quotaRefs(names ...string) []*metav1.ObjectReference {
	var out []*metav1.ObjectReference
	for _, n := range names {
		out = append(out, &metav1.ObjectReference{Namespace: "garden-dev", Name: n})
	}
	return out
}

// TestQuotaReconcile: the smallest lifetime of the binding's quotas sets the expiration from the creation; the
// annotation stays when the quotas change and goes when none limits the lifetime; an expired shoot is confirmed and
// deleted.
func TestQuotaReconcile(t *testing.T) {
	e := newEnv(t, time.Now())
	r := &quotaReconciler{c: e.c, syncPeriod: time.Hour, clock: e.clock, log: testLog()}
	controllertest.Create(e.t, e.c.quotas, quota("week", ptr(int32(7))))
	controllertest.Create(e.t, e.c.quotas, quota("three-days", ptr(int32(3))))
	controllertest.Create(e.t, e.c.quotas, quota("unlimited", nil))
	controllertest.Create(e.t, e.c.secretBindings, &corev1beta1.SecretBinding{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "sb"},
		Quotas: quotaRefs("week", "three-days", "unlimited")})
	controllertest.Create(e.t, e.c.credentialsBindings, &securityv1alpha1.CredentialsBinding{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "cb"},
		Quotas: quotaRefs("week")})
	controllertest.Create(e.t, e.c.secretBindings, &corev1beta1.SecretBinding{Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "free"},
		Quotas: quotaRefs("unlimited")})

	s := e.createShoot(newShoot("s", func(s *corev1beta1.Shoot) {
		s.Spec.SecretBindingName = ptr("sb")
		s.Metadata.Finalizers = []string{"gardener"}
	}))
	created := s.GetMetadata().GetCreationTimestamp().AsTime()
	expiration := created.Add(3 * 24 * time.Hour)
	annotation := func(name string) (string, bool) {
		v, ok := e.shoot(name).GetMetadata().GetAnnotations()[AnnotationExpirationTimestamp]
		return v, ok
	}

	e.clock.SetTime(created.Add(24 * time.Hour))
	if res := reconcile(t, r, "s"); res.RequeueAfter != time.Hour {
		t.Fatalf("requeue after %v, want the sync period", res.RequeueAfter)
	}
	if v, _ := annotation("s"); v != expiration.UTC().Format(time.RFC3339) {
		t.Fatalf("expiration %q, want %s (creation + 3 days)", v, expiration.UTC().Format(time.RFC3339))
	}

	// A shorter lifetime does not move the expiration.
	e.updateQuota("three-days", 1)
	reconcile(t, r, "s")
	if v, _ := annotation("s"); v != expiration.UTC().Format(time.RFC3339) {
		t.Fatalf("expiration moved to %q when the quota changed", v)
	}

	// Half an hour before the expiration: looked at again right after it.
	e.clock.SetTime(expiration.Add(-30 * time.Minute))
	if res := reconcile(t, r, "s"); res.RequeueAfter != 30*time.Minute+time.Second {
		t.Fatalf("requeue after %v, want at the expiration", res.RequeueAfter)
	}
	e.clock.SetTime(expiration.Add(time.Second))
	if res := reconcile(t, r, "s"); res.RequeueAfter != 0 {
		t.Fatalf("requeue after %v after the deletion", res.RequeueAfter)
	}
	gone := e.shoot("s")
	if gone.GetMetadata().GetDeletionTimestamp() == nil || gone.GetMetadata().GetAnnotations()[AnnotationConfirmDeletion] != "true" {
		t.Fatalf("expired shoot: deletion %v, annotations %v", gone.GetMetadata().GetDeletionTimestamp(), gone.GetMetadata().GetAnnotations())
	}

	// Credentials bindings bring quotas too; a binding without a limiting quota removes the annotation.
	e.createShoot(newShoot("c", func(s *corev1beta1.Shoot) { s.Spec.CredentialsBindingName = ptr("cb") }))
	reconcile(t, r, "c")
	if _, ok := annotation("c"); !ok {
		t.Fatal("no expiration from the credentials binding's quota")
	}
	e.createShoot(newShoot("f", func(s *corev1beta1.Shoot) {
		s.Spec.SecretBindingName = ptr("free")
		s.Metadata.Annotations = map[string]string{AnnotationExpirationTimestamp: "2000-01-01T00:00:00Z"}
	}))
	if res := reconcile(t, r, "f"); res.RequeueAfter != time.Hour {
		t.Fatalf("requeue after %v, want the sync period", res.RequeueAfter)
	}
	if _, ok := annotation("f"); ok {
		t.Fatal("the expiration annotation stayed without a limiting quota")
	}
	if e.shoot("f").GetMetadata().GetDeletionTimestamp() != nil {
		t.Fatal("a shoot without a limiting quota was deleted")
	}

	// Errors are retried: a missing binding, a malformed annotation.
	e.createShoot(newShoot("missing", func(s *corev1beta1.Shoot) { s.Spec.SecretBindingName = ptr("nope") }))
	e.createShoot(newShoot("malformed", func(s *corev1beta1.Shoot) {
		s.Spec.SecretBindingName = ptr("sb")
		s.Metadata.Annotations = map[string]string{AnnotationExpirationTimestamp: "tomorrow"}
	}))
	for _, name := range []string{"missing", "malformed"} {
		if _, err := r.Reconcile(t.Context(), key(e.shoot(name))); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func (e *env) updateQuota(name string, days int32) {
	e.t.Helper()
	obj, err := e.c.quotas.Get(e.t.Context(), "garden-dev", name)
	if err != nil {
		e.t.Fatal(err)
	}
	q := proto.CloneOf(obj.(*corev1beta1.Quota))
	q.Spec.ClusterLifetimeDays = &days
	if _, err := e.c.quotas.Update(e.t.Context(), q); err != nil {
		e.t.Fatal(err)
	}
}
