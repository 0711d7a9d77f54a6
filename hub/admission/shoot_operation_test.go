package admission_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

const operationField = "metadata.annotations[gardener.cloud/operation]"

// rotated is a shoot whose last operation and credentials rotations are as given: phases of the CA, the service
// account key and the etcd encryption key ("" leaves a rotation out).
func rotated(s *corev1beta1.Shoot, lastType, lastState, ca, sa, etcd string) *corev1beta1.Shoot {
	s = clone(s)
	s.Status = &corev1beta1.ShootStatus{}
	if lastType != "" {
		s.Status.LastOperation = &metav1.LastOperation{Type: lastType, State: lastState}
	}
	r := &corev1beta1.ShootCredentialsRotation{}
	if ca != "" {
		r.CertificateAuthorities = &corev1beta1.CARotation{Phase: ca}
	}
	if sa != "" {
		r.ServiceAccountKey = &corev1beta1.ServiceAccountKeyRotation{Phase: sa}
	}
	if etcd != "" {
		r.EtcdEncryptionKey = &corev1beta1.ETCDEncryptionKeyRotation{Phase: etcd}
	}
	s.Status.Credentials = &corev1beta1.ShootCredentials{Rotation: r}
	return s
}

func annotated(s *corev1beta1.Shoot, op string) *corev1beta1.Shoot {
	s = clone(s)
	if s.Metadata.Annotations == nil {
		s.Metadata.Annotations = map[string]string{}
	}
	s.Metadata.Annotations["gardener.cloud/operation"] = op
	return s
}

// TestShootOperation checks the gardener.cloud/operation annotation of shoots with Gardener's rules: the operations
// known, those refused for hibernated shoots, and the rotation phases a start and a complete need. Every error names
// the annotation; want lists substrings of the errors' messages, one per error.
func TestShootOperation(t *testing.T) {
	r, base := shootGarden(t)
	base.Spec.SeedName = ptr("a")
	ready := rotated(base, "Reconcile", "Succeeded", "", "", "")
	prepared := rotated(base, "Reconcile", "Succeeded", "Prepared", "Prepared", "Prepared")
	completed := rotated(base, "Reconcile", "Succeeded", "Completed", "Completed", "Completed")
	preparing := rotated(base, "Reconcile", "Processing", "Preparing", "Preparing", "Preparing")
	hibernated := with(ready, func(s *corev1beta1.Shoot) { s.Spec.Hibernation = &corev1beta1.Hibernation{Enabled: ptr(true)} })
	noSSH := with(ready, func(s *corev1beta1.Shoot) {
		s.Spec.Provider.WorkersSettings = &corev1beta1.WorkersSettings{SshAccess: &corev1beta1.SSHAccess{Enabled: ptr(false)}}
	})
	for _, c := range []struct {
		name     string
		old, obj *corev1beta1.Shoot
		want     []string
	}{
		{"reconcile", ready, annotated(ready, "reconcile"), nil},
		{"retry", ready, annotated(ready, "retry"), nil},
		{"maintain", ready, annotated(ready, "maintain"), nil},
		{"maintenance's list of operations", ready, annotated(ready, "rotate-ssh-keypair;reconcile"), nil},
		{"unknown operation", ready, annotated(ready, "rotate-everything"), []string{"Unsupported value"}},
		{"start, never rotated", ready, annotated(ready, "rotate-credentials-start"), nil},
		{"start after a completed rotation", completed, annotated(completed, "rotate-credentials-start"), nil},
		{"start while prepared", prepared, annotated(prepared, "rotate-credentials-start"), []string{
			"cannot start rotation of all credentials if .status.credentials.rotation.certificateAuthorities.phase is not 'Completed'",
			"cannot start rotation of all credentials if .status.credentials.rotation.serviceAccountKey.phase is not 'Completed'",
			"cannot start rotation of all credentials if .status.credentials.rotation.etcdEncryptionKey.phase is not 'Completed'"}},
		{"start while hibernated", hibernated, annotated(hibernated, "rotate-credentials-start"), []string{"operation is not permitted when shoot is hibernated"}},
		{"start before the shoot was created", rotated(base, "Create", "Processing", "", "", ""), annotated(rotated(base, "Create", "Processing", "", "", ""), "rotate-credentials-start"),
			[]string{"cannot start rotation of all credentials if shoot was not yet created successfully or is not ready for reconciliation"}},
		{"start on create", nil, annotated(base, "rotate-ca-start"), []string{"cannot start CA rotation if shoot was not yet created successfully"}},
		{"complete when prepared", prepared, annotated(prepared, "rotate-credentials-complete"), nil},
		{"complete never started", ready, annotated(ready, "rotate-credentials-complete"), []string{
			"cannot complete rotation of all credentials if .status.credentials.rotation.certificateAuthorities.phase is not 'Prepared'",
			"cannot complete rotation of all credentials if .status.credentials.rotation.serviceAccountKey.phase is not 'Prepared'",
			"cannot complete rotation of all credentials if .status.credentials.rotation.etcdEncryptionKey.phase is not 'Prepared'"}},
		{"complete while hibernated", with(prepared, func(s *corev1beta1.Shoot) { s.Spec.Hibernation = &corev1beta1.Hibernation{Enabled: ptr(true)} }),
			annotated(with(prepared, func(s *corev1beta1.Shoot) { s.Spec.Hibernation = &corev1beta1.Hibernation{Enabled: ptr(true)} }), "rotate-credentials-complete"),
			[]string{"operation is not permitted when shoot is hibernated"}},
		{"CA start while prepared", prepared, annotated(prepared, "rotate-ca-start"), []string{"cannot start CA rotation if .status.credentials.rotation.certificateAuthorities.phase is not 'Completed'"}},
		{"CA complete when completed", completed, annotated(completed, "rotate-ca-complete"), []string{"cannot complete CA rotation if .status.credentials.rotation.certificateAuthorities.phase is not 'Prepared'"}},
		{"service account key start", completed, annotated(completed, "rotate-serviceaccount-key-start"), nil},
		{"service account key complete", completed, annotated(completed, "rotate-serviceaccount-key-complete"),
			[]string{"cannot complete service account key rotation if .status.credentials.rotation.serviceAccountKey.phase is not 'Prepared'"}},
		{"etcd key start while preparing", preparing, annotated(preparing, "rotate-etcd-encryption-key-start"),
			[]string{"cannot start ETCD encryption key rotation if .status.credentials.rotation.etcdEncryptionKey.phase is not 'Completed'"}},
		{"etcd key complete", prepared, annotated(prepared, "rotate-etcd-encryption-key-complete"), nil},
		{"ssh keypair", ready, annotated(ready, "rotate-ssh-keypair"), nil},
		{"ssh keypair while hibernated", hibernated, annotated(hibernated, "rotate-ssh-keypair"), nil},
		{"ssh keypair without ssh access", noSSH, annotated(noSSH, "rotate-ssh-keypair"), []string{"cannot rotate SSH keypair if the shoot has no workers or its SSH access is disabled"}},
		{"observability", ready, annotated(ready, "rotate-observability-credentials"), nil},
		{"without workers rollout", ready, annotated(ready, "rotate-credentials-start-without-workers-rollout"),
			[]string{`operation "rotate-credentials-start-without-workers-rollout" is not supported by Trellis`}},
		{"CA without workers rollout", ready, annotated(ready, "rotate-ca-start-without-workers-rollout"), []string{`use "rotate-ca-start"`}},
		{"rollout workers", ready, annotated(ready, "rotate-rollout-workers=pool"), []string{`operation "rotate-rollout-workers=pool" is not supported by Trellis`}},
		// The agent writes to the shoot while its rotation runs (its finalizer, then the annotation's removal):
		// the rules on the phases apply when the operation is set, not to the writes after.
		{"writes while the rotation it set runs", annotated(preparing, "rotate-credentials-start"),
			with(annotated(preparing, "rotate-credentials-start"), func(s *corev1beta1.Shoot) { s.Metadata.Finalizers = []string{"gardener"} }), nil},
		{"the agent removes the operation", annotated(preparing, "rotate-credentials-start"), preparing, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var old *corev1beta1.Shoot
			if c.old != nil {
				old = clone(c.old)
			}
			errs := admitShoot(t, r, "", clone(c.obj), old)
			var got field.ErrorList
			for _, e := range errs {
				if e.Field != operationField {
					t.Errorf("unexpected error: %v", e)
					continue
				}
				got = append(got, e)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %d errors on %s, want %d: %v", len(got), operationField, len(c.want), got)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i].Error(), w) {
					t.Errorf("error %d: %q, want it to contain %q", i, got[i].Error(), w)
				}
			}
		})
	}
}

// TestShootGenerationOnRotation checks that setting a credentials rotation moves the generation, as Gardener's
// strategy does, and that nothing else about the annotation does.
func TestShootGenerationOnRotation(t *testing.T) {
	_, base := shootGarden(t)
	must := plugins.For(base).MustIncreaseGeneration
	if must == nil {
		t.Fatal("Shoot has no MustIncreaseGeneration")
	}
	for _, c := range []struct {
		name     string
		from, to string
		want     bool
	}{
		{"rotation set", "", "rotate-credentials-start", true},
		{"one of maintenance's operations", "", "rotate-ssh-keypair;reconcile", true},
		{"another rotation", "rotate-ca-start", "rotate-ca-complete", true},
		{"rotation kept", "rotate-credentials-start", "rotate-credentials-start", false},
		{"rotation removed", "rotate-credentials-start", "", false},
		{"reconcile", "", "reconcile", false},
		{"unknown", "", "rotate-everything", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cur, next := clone(base), clone(base)
			if c.from != "" {
				cur = annotated(cur, c.from)
			}
			if c.to != "" {
				next = annotated(next, c.to)
			}
			if got := must(next, cur); got != c.want {
				t.Errorf("MustIncreaseGeneration %q → %q = %v, want %v", c.from, c.to, got, c.want)
			}
		})
	}
}
