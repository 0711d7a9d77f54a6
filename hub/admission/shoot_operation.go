package admission

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Gardener's shoot operations (gardener.cloud/operation). One value may name several, separated by ";", as the
// hub's maintenance writes them.
//
//nolint:gosec // G101: operation names (rotate-credentials-...), not credentials
const (
	shootOpReconcile                   = "reconcile"
	shootOpRetry                       = "retry"
	shootOpMaintain                    = "maintain"
	shootOpRotateCredentialsStart      = "rotate-credentials-start"
	shootOpRotateCredentialsComplete   = "rotate-credentials-complete"
	shootOpRotateCAStart               = "rotate-ca-start"
	shootOpRotateCAComplete            = "rotate-ca-complete"
	shootOpRotateSAKeyStart            = "rotate-serviceaccount-key-start"
	shootOpRotateSAKeyComplete         = "rotate-serviceaccount-key-complete"
	shootOpRotateETCDKeyStart          = "rotate-etcd-encryption-key-start"
	shootOpRotateETCDKeyComplete       = "rotate-etcd-encryption-key-complete"
	shootOpRotateSSHKeypair            = "rotate-ssh-keypair"
	shootOpRotateObservability         = "rotate-observability-credentials"
	shootOpRotateRolloutWorkers        = "rotate-rollout-workers"
	shootOperationsSeparator           = ";"
	rotationPhasePrepared              = "Prepared"
	rotationPhaseCompleted             = "Completed"
	withoutWorkersRolloutSuffix        = "-without-workers-rollout"
	shootOperationNotSupportedTemplate = "operation %q is not supported by Trellis: the agent rotates credentials without rolling worker pools, so there is nothing to leave out; use %q"
)

// shootOperations are the operations a Shoot may be annotated with: those the agent (reconcile, retry, the
// rotations) and the hub's maintenance (maintain) act on.
var shootOperations = []string{
	shootOpMaintain, shootOpReconcile, shootOpRetry,
	shootOpRotateCAComplete, shootOpRotateCAStart, shootOpRotateCredentialsComplete, shootOpRotateCredentialsStart,
	shootOpRotateETCDKeyComplete, shootOpRotateETCDKeyStart, shootOpRotateObservability,
	shootOpRotateSAKeyComplete, shootOpRotateSAKeyStart, shootOpRotateSSHKeypair,
}

// forbiddenWhenHibernated are Gardener's operations that need a running control plane.
var forbiddenWhenHibernated = []string{
	shootOpRotateCredentialsStart, shootOpRotateCredentialsComplete, shootOpRotateETCDKeyStart, shootOpRotateETCDKeyComplete,
	shootOpRotateSAKeyStart, shootOpRotateSAKeyComplete,
}

// isShootRotation reports whether op is a credentials rotation.
func isShootRotation(op string) bool {
	return strings.HasPrefix(op, "rotate-") && slices.Contains(shootOperations, op)
}

// shootOperationsOf splits a gardener.cloud/operation value into its operations.
func shootOperationsOf(value string) []string {
	var ops []string
	for _, op := range strings.Split(value, shootOperationsSeparator) {
		if op = strings.TrimSpace(op); op != "" {
			ops = append(ops, op)
		}
	}
	return ops
}

// validateShootOperation checks the shoot's gardener.cloud/operation annotation as Gardener's validateShootOperation
// does: every operation is known, the rotations that need a running control plane are refused for a hibernated
// shoot, and a rotation starts only when the previous one of its credentials completed and completes only when it is
// Prepared. The rules on the rotation's state apply when the operation is set (not yet on old): the agent removes it
// once it took it up, and writes to the shoot meanwhile are not held up by the rotation the operation started.
func validateShootOperation(s, old *corev1beta1.Shoot) field.ErrorList {
	p := metadataPath.Child("annotations").Key(annotationOperation)
	var errs field.ErrorList
	previous := shootOperationsOf(old.GetMetadata().GetAnnotations()[annotationOperation])
	for _, op := range shootOperationsOf(s.GetMetadata().GetAnnotations()[annotationOperation]) {
		if base, ok := strings.CutSuffix(op, withoutWorkersRolloutSuffix); ok && slices.Contains(shootOperations, base) {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf(shootOperationNotSupportedTemplate, op, base)))
			continue
		}
		if op == shootOpRotateRolloutWorkers || strings.HasPrefix(op, shootOpRotateRolloutWorkers+"=") {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("operation %q is not supported by Trellis: rotations never wait for worker pools to roll out here", op)))
			continue
		}
		if !slices.Contains(shootOperations, op) {
			errs = append(errs, field.NotSupported(p, op, shootOperations))
			continue
		}
		if s.GetSpec().GetHibernation().GetEnabled() && slices.Contains(forbiddenWhenHibernated, op) {
			errs = append(errs, field.Forbidden(p, "operation is not permitted when shoot is hibernated"))
		}
		if old == nil || !slices.Contains(previous, op) {
			errs = append(errs, validateShootOperationContext(op, s, p)...)
		}
	}
	return errs
}

// validateShootOperationContext checks a newly set rotation against the shoot's state, with Gardener's messages.
func validateShootOperationContext(op string, s *corev1beta1.Shoot, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	rot := s.GetStatus().GetCredentials().GetRotation()
	ca, sa, etcd := rot.GetCertificateAuthorities().GetPhase(), rot.GetServiceAccountKey().GetPhase(), rot.GetEtcdEncryptionKey().GetPhase()
	notReady := func(what string) {
		if !readyForRotationStart(s.GetStatus().GetLastOperation()) {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("cannot start %s if shoot was not yet created successfully or is not ready for reconciliation", what)))
		}
	}
	mustBe := func(verb, what, phase, field_, want string) {
		if (want == rotationPhaseCompleted && phase != "" && phase != want) || (want == rotationPhasePrepared && phase != want) {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("cannot %s %s if .status.credentials.rotation.%s.phase is not '%s'", verb, what, field_, want)))
		}
	}
	const all, caWhat, saWhat, etcdWhat = "rotation of all credentials", "CA rotation", "service account key rotation", "ETCD encryption key rotation"
	switch op {
	case shootOpRotateCredentialsStart:
		notReady(all)
		mustBe("start", all, ca, "certificateAuthorities", rotationPhaseCompleted)
		mustBe("start", all, sa, "serviceAccountKey", rotationPhaseCompleted)
		mustBe("start", all, etcd, "etcdEncryptionKey", rotationPhaseCompleted)
	case shootOpRotateCredentialsComplete:
		mustBe("complete", all, ca, "certificateAuthorities", rotationPhasePrepared)
		mustBe("complete", all, sa, "serviceAccountKey", rotationPhasePrepared)
		mustBe("complete", all, etcd, "etcdEncryptionKey", rotationPhasePrepared)
	case shootOpRotateCAStart:
		notReady(caWhat)
		mustBe("start", caWhat, ca, "certificateAuthorities", rotationPhaseCompleted)
	case shootOpRotateCAComplete:
		mustBe("complete", caWhat, ca, "certificateAuthorities", rotationPhasePrepared)
	case shootOpRotateSAKeyStart:
		notReady(saWhat)
		mustBe("start", saWhat, sa, "serviceAccountKey", rotationPhaseCompleted)
	case shootOpRotateSAKeyComplete:
		mustBe("complete", saWhat, sa, "serviceAccountKey", rotationPhasePrepared)
	case shootOpRotateETCDKeyStart:
		notReady(etcdWhat)
		mustBe("start", etcdWhat, etcd, "etcdEncryptionKey", rotationPhaseCompleted)
	case shootOpRotateETCDKeyComplete:
		mustBe("complete", etcdWhat, etcd, "etcdEncryptionKey", rotationPhasePrepared)
	case shootOpRotateSSHKeypair:
		if !shootEnablesSSHAccess(s) {
			errs = append(errs, field.Forbidden(p, "cannot rotate SSH keypair if the shoot has no workers or its SSH access is disabled"))
		}
	}
	return errs
}

// readyForRotationStart is Gardener's isShootReadyForRotationStart: the shoot was created or restored successfully,
// or its last operation is a reconcile.
func readyForRotationStart(lo interface {
	GetType() string
	GetState() string
}) bool {
	switch lo.GetType() {
	case "Create", "Restore":
		return lo.GetState() == "Succeeded"
	case "Reconcile":
		return true
	}
	return false
}

// shootEnablesSSHAccess is Gardener's ShootEnablesSSHAccess: a shoot with workers whose SSH access is not disabled.
func shootEnablesSSHAccess(s *corev1beta1.Shoot) bool {
	if len(s.GetSpec().GetProvider().GetWorkers()) == 0 {
		return false
	}
	a := s.GetSpec().GetProvider().GetWorkersSettings().GetSshAccess()
	return a == nil || a.Enabled == nil || a.GetEnabled()
}

// shootMustIncreaseGeneration moves a Shoot's generation when a credentials rotation is set on it, as Gardener's
// strategy does, so that the agent reconciles it. The annotation stays until the agent took it up. Only a rotation
// that was not set before counts: the agent's own writes meanwhile (its finalizer) do not move the generation again.
func shootMustIncreaseGeneration(next, cur *corev1beta1.Shoot) bool {
	previous := shootOperationsOf(cur.GetMetadata().GetAnnotations()[annotationOperation])
	for _, op := range shootOperationsOf(next.GetMetadata().GetAnnotations()[annotationOperation]) {
		if isShootRotation(op) && !slices.Contains(previous, op) {
			return true
		}
	}
	return false
}
