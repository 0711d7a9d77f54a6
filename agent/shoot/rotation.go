package shoot

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trellis-dev/trellis/agent/shoot/credentials"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Gardener's credentials rotation operations (gardener.cloud/operation) and phases.
const (
	opRotateCredentialsStart    = "rotate-credentials-start"
	opRotateCredentialsComplete = "rotate-credentials-complete"
	opRotateCAStart             = "rotate-ca-start"
	opRotateCAComplete          = "rotate-ca-complete"
	opRotateSAKeyStart          = "rotate-serviceaccount-key-start"
	opRotateSAKeyComplete       = "rotate-serviceaccount-key-complete"
	opRotateETCDKeyStart        = "rotate-etcd-encryption-key-start"
	opRotateETCDKeyComplete     = "rotate-etcd-encryption-key-complete"
	opRotateSSHKeypair          = "rotate-ssh-keypair"
	opRotateObservability       = "rotate-observability-credentials"

	phasePreparing  = "Preparing"
	phasePrepared   = "Prepared"
	phaseCompleting = "Completing"
	phaseCompleted  = "Completed"

	// operationsSeparator separates the operations of one gardener.cloud/operation value, as the hub's maintenance
	// writes them ("rotate-ssh-keypair;reconcile").
	operationsSeparator = ";"
)

// operationsOf splits a gardener.cloud/operation value into its operations.
func operationsOf(value string) []string {
	var ops []string
	for _, op := range strings.Split(value, operationsSeparator) {
		if op = strings.TrimSpace(op); op != "" {
			ops = append(ops, op)
		}
	}
	return ops
}

// isRotation reports whether op is one of the rotation operations the agent performs.
func isRotation(op string) bool {
	switch op {
	case opRotateCredentialsStart, opRotateCredentialsComplete, opRotateCAStart, opRotateCAComplete, opRotateSAKeyStart,
		opRotateSAKeyComplete, opRotateETCDKeyStart, opRotateETCDKeyComplete, opRotateSSHKeypair, opRotateObservability:
		return true
	}
	return false
}

// takenUp reports whether the reconcile flow takes op up and removes it from the annotation as it starts.
func takenUp(op string) bool {
	return op == operationReconcile || op == operationRetry || isRotation(op)
}

// sshEnabled is Gardener's ShootEnablesSSHAccess: a shoot with workers whose SSH access is not disabled.
func sshEnabled(s *corev1beta1.Shoot) bool {
	if len(s.GetSpec().GetProvider().GetWorkers()) == 0 {
		return false
	}
	a := s.GetSpec().GetProvider().GetWorkersSettings().GetSshAccess()
	return a == nil || a.Enabled == nil || a.GetEnabled()
}

// phased gives uniform access to the two-phase rotations (CA, service account key, etcd encryption key), whose
// messages have the same fields.
type phased struct {
	phase                                                    *string
	initiated, initiationFinished, completionTriggered, done **timestamppb.Timestamp
}

func rotationOf(s *corev1beta1.Shoot) *corev1beta1.ShootCredentialsRotation {
	if s.Status == nil {
		s.Status = &corev1beta1.ShootStatus{}
	}
	if s.Status.Credentials == nil {
		s.Status.Credentials = &corev1beta1.ShootCredentials{}
	}
	if s.Status.Credentials.Rotation == nil {
		s.Status.Credentials.Rotation = &corev1beta1.ShootCredentialsRotation{}
	}
	return s.Status.Credentials.Rotation
}

func caRotation(s *corev1beta1.Shoot) phased {
	r := rotationOf(s)
	if r.CertificateAuthorities == nil {
		r.CertificateAuthorities = &corev1beta1.CARotation{}
	}
	x := r.CertificateAuthorities
	return phased{&x.Phase, &x.LastInitiationTime, &x.LastInitiationFinishedTime, &x.LastCompletionTriggeredTime, &x.LastCompletionTime}
}

func saRotation(s *corev1beta1.Shoot) phased {
	r := rotationOf(s)
	if r.ServiceAccountKey == nil {
		r.ServiceAccountKey = &corev1beta1.ServiceAccountKeyRotation{}
	}
	x := r.ServiceAccountKey
	return phased{&x.Phase, &x.LastInitiationTime, &x.LastInitiationFinishedTime, &x.LastCompletionTriggeredTime, &x.LastCompletionTime}
}

func etcdRotation(s *corev1beta1.Shoot) phased {
	r := rotationOf(s)
	if r.EtcdEncryptionKey == nil {
		r.EtcdEncryptionKey = &corev1beta1.ETCDEncryptionKeyRotation{}
	}
	x := r.EtcdEncryptionKey
	return phased{&x.Phase, &x.LastInitiationTime, &x.LastInitiationFinishedTime, &x.LastCompletionTriggeredTime, &x.LastCompletionTime}
}

// start begins the preparation of a two-phase rotation, as gardenlet's startRotation*: Preparing, initiated now.
// A rotation that is Preparing already (a flow that was interrupted before it removed the annotation) keeps its
// initiation time, and with it the credentials generated for it.
func (p phased) start(now *timestamppb.Timestamp) {
	if *p.phase == phasePreparing {
		return
	}
	*p.phase, *p.initiated, *p.initiationFinished, *p.completionTriggered = phasePreparing, now, nil, nil
}

// complete begins the completion, as gardenlet's completeRotation*: Completing, triggered now.
func (p phased) complete(now *timestamppb.Timestamp) {
	if *p.phase == phaseCompleting {
		return
	}
	*p.phase, *p.completionTriggered = phaseCompleting, now
}

// succeed moves the rotation on after a successful flow: Preparing to Prepared, Completing to Completed.
func (p phased) succeed(now *timestamppb.Timestamp) {
	switch *p.phase {
	case phasePreparing:
		*p.phase, *p.initiationFinished = phasePrepared, now
	case phaseCompleting:
		*p.phase, *p.done, *p.initiationFinished, *p.completionTriggered = phaseCompleted, now, nil, nil
	}
}

// inProgress reports whether a one-phase rotation was initiated after it last completed.
func inProgress(initiated, completed *timestamppb.Timestamp) bool {
	return initiated != nil && (completed == nil || completed.AsTime().Before(initiated.AsTime()))
}

func startSSHKeypair(s *corev1beta1.Shoot, now *timestamppb.Timestamp) {
	if !sshEnabled(s) {
		return
	}
	r := rotationOf(s)
	if r.SshKeypair == nil {
		r.SshKeypair = &corev1beta1.ShootSSHKeypairRotation{}
	}
	if !inProgress(r.SshKeypair.LastInitiationTime, r.SshKeypair.LastCompletionTime) {
		r.SshKeypair.LastInitiationTime = now
	}
}

func startObservability(s *corev1beta1.Shoot, now *timestamppb.Timestamp) {
	r := rotationOf(s)
	if r.Observability == nil {
		r.Observability = &corev1beta1.ObservabilityRotation{}
	}
	if !inProgress(r.Observability.LastInitiationTime, r.Observability.LastCompletionTime) {
		r.Observability.LastInitiationTime = now
	}
}

// startRotations applies the rotation operations of the shoot's gardener.cloud/operation annotation to its status,
// as gardenlet does when its flow starts, and reports whether there were any.
func startRotations(s *corev1beta1.Shoot, now time.Time) bool {
	ts := timestamppb.New(now.UTC().Truncate(time.Second))
	started := false
	for _, op := range operationsOf(s.GetMetadata().GetAnnotations()[annotationOperation]) {
		if !isRotation(op) {
			continue
		}
		started = true
		switch op {
		case opRotateCredentialsStart:
			caRotation(s).start(ts)
			saRotation(s).start(ts)
			startSSHKeypair(s, ts)
			startObservability(s, ts)
			etcdRotation(s).start(ts)
		case opRotateCredentialsComplete:
			caRotation(s).complete(ts)
			saRotation(s).complete(ts)
			etcdRotation(s).complete(ts)
		case opRotateCAStart:
			caRotation(s).start(ts)
		case opRotateCAComplete:
			caRotation(s).complete(ts)
		case opRotateSAKeyStart:
			saRotation(s).start(ts)
		case opRotateSAKeyComplete:
			saRotation(s).complete(ts)
		case opRotateETCDKeyStart:
			etcdRotation(s).start(ts)
		case opRotateETCDKeyComplete:
			etcdRotation(s).complete(ts)
		case opRotateSSHKeypair:
			startSSHKeypair(s, ts)
		case opRotateObservability:
			startObservability(s, ts)
		}
	}
	return started
}

// finishRotations records in the status what a successful flow achieved, as gardenlet's
// patchShootStatusOperationSuccess: two-phase rotations move on, one-phase rotations initiated since their last
// completion complete, and a shoot without SSH access has no SSH keypair rotation. It reports whether the shoot has
// any rotation status.
func finishRotations(s *corev1beta1.Shoot, now time.Time) bool {
	if s.GetStatus().GetCredentials().GetRotation() == nil {
		return false
	}
	ts := timestamppb.New(now.UTC().Truncate(time.Second))
	r := s.Status.Credentials.Rotation
	if r.CertificateAuthorities != nil {
		caRotation(s).succeed(ts)
	}
	if r.ServiceAccountKey != nil {
		saRotation(s).succeed(ts)
	}
	if r.EtcdEncryptionKey != nil {
		etcdRotation(s).succeed(ts)
	}
	if k := r.SshKeypair; k != nil && inProgress(k.LastInitiationTime, k.LastCompletionTime) {
		k.LastCompletionTime = ts
	}
	if o := r.Observability; o != nil && inProgress(o.LastInitiationTime, o.LastCompletionTime) {
		o.LastCompletionTime = ts
	}
	if !sshEnabled(s) {
		r.SshKeypair = nil
	}
	return true
}

// rotationFields are the fields of each rotation, set to null in a patch when the status does not have them (a JSON
// merge patch leaves out what it does not name).
var rotationFields = map[string][]string{
	"certificateAuthorities": {"phase", "lastInitiationTime", "lastInitiationFinishedTime", "lastCompletionTriggeredTime", "lastCompletionTime"},
	"serviceAccountKey":      {"phase", "lastInitiationTime", "lastInitiationFinishedTime", "lastCompletionTriggeredTime", "lastCompletionTime"},
	"etcdEncryptionKey":      {"phase", "lastInitiationTime", "lastInitiationFinishedTime", "lastCompletionTriggeredTime", "lastCompletionTime"},
	"sshKeypair":             {"lastInitiationTime", "lastCompletionTime"},
	"observability":          {"lastInitiationTime", "lastCompletionTime"},
}

// credentialsPatch is the status.credentials of s as a merge patch that makes the stored rotations equal to s's.
func credentialsPatch(s *corev1beta1.Shoot) map[string]any {
	rotation := map[string]any{}
	var have map[string]json.RawMessage
	_ = json.Unmarshal(jsonOf(rotationOf(s)), &have)
	for name, fields := range rotationFields {
		raw, ok := have[name]
		if !ok {
			rotation[name] = nil
			continue
		}
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		for _, f := range fields {
			if _, ok := m[f]; !ok {
				m[f] = nil
			}
		}
		rotation[name] = m
	}
	return map[string]any{"rotation": rotation}
}

// remainingOperations is the annotation's value without the operations the flow took up ("" when none remain).
func remainingOperations(value string) string {
	ops := slices.DeleteFunc(operationsOf(value), takenUp)
	return strings.Join(ops, operationsSeparator)
}

// rotationWant is what the shoot's status says about its credentials, for the credentials manager.
func rotationWant(s *corev1beta1.Shoot) credentials.Want {
	r := s.GetStatus().GetCredentials().GetRotation()
	at := func(t *timestamppb.Timestamp) time.Time {
		if t == nil {
			return time.Time{}
		}
		return t.AsTime()
	}
	w := credentials.Want{
		CA:                credentials.Rotation{Phase: r.GetCertificateAuthorities().GetPhase(), Initiated: at(r.GetCertificateAuthorities().GetLastInitiationTime())},
		ServiceAccountKey: credentials.Rotation{Phase: r.GetServiceAccountKey().GetPhase(), Initiated: at(r.GetServiceAccountKey().GetLastInitiationTime())},
		ETCDEncryptionKey: credentials.Rotation{Phase: r.GetEtcdEncryptionKey().GetPhase(), Initiated: at(r.GetEtcdEncryptionKey().GetLastInitiationTime())},
	}
	if sshEnabled(s) {
		w.SSHKeypair = &credentials.Rotation{Initiated: at(r.GetSshKeypair().GetLastInitiationTime())}
	}
	return w
}
