package shoot

import (
	"encoding/json"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func rotationShoot(op string) *corev1beta1.Shoot {
	return &corev1beta1.Shoot{
		Metadata: &metav1.ObjectMeta{Name: "a", Namespace: "garden-dev", Annotations: map[string]string{annotationOperation: op}},
		Spec:     &corev1beta1.ShootSpec{Provider: &corev1beta1.Provider{Workers: []*corev1beta1.Worker{{Name: "pool"}}}},
	}
}

// TestRotationStatus follows gardenlet's status handling of a rotate-credentials start and complete: the phases and
// times at flow start and after success, and a start that is found again after an interrupted flow.
func TestRotationStatus(t *testing.T) {
	t1 := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	t2, t3, t4 := t1.Add(time.Minute), t1.Add(2*time.Minute), t1.Add(3*time.Minute)
	s := rotationShoot("rotate-credentials-start")
	if !startRotations(s, t1) {
		t.Fatal("no rotation started")
	}
	r := s.Status.Credentials.Rotation
	if r.CertificateAuthorities.Phase != phasePreparing || !r.CertificateAuthorities.LastInitiationTime.AsTime().Equal(t1) ||
		r.ServiceAccountKey.Phase != phasePreparing || r.EtcdEncryptionKey.Phase != phasePreparing ||
		!r.SshKeypair.LastInitiationTime.AsTime().Equal(t1) || !r.Observability.LastInitiationTime.AsTime().Equal(t1) {
		t.Fatalf("after start: %v", r)
	}
	// The agent stopped before it removed the annotation: the rotation keeps its initiation time (and keys).
	startRotations(s, t2)
	if !r.CertificateAuthorities.LastInitiationTime.AsTime().Equal(t1) || !r.SshKeypair.LastInitiationTime.AsTime().Equal(t1) {
		t.Fatalf("a start found again moved the initiation: %v", r)
	}
	finishRotations(s, t2)
	if r.CertificateAuthorities.Phase != phasePrepared || !r.CertificateAuthorities.LastInitiationFinishedTime.AsTime().Equal(t2) ||
		!r.SshKeypair.LastCompletionTime.AsTime().Equal(t2) || !r.Observability.LastCompletionTime.AsTime().Equal(t2) {
		t.Fatalf("after the start succeeded: %v", r)
	}
	s.Metadata.Annotations[annotationOperation] = "rotate-credentials-complete"
	startRotations(s, t3)
	if r.EtcdEncryptionKey.Phase != phaseCompleting || !r.EtcdEncryptionKey.LastCompletionTriggeredTime.AsTime().Equal(t3) {
		t.Fatalf("after complete: %v", r)
	}
	finishRotations(s, t4)
	ca := r.CertificateAuthorities
	if ca.Phase != phaseCompleted || !ca.LastCompletionTime.AsTime().Equal(t4) || ca.LastInitiationFinishedTime != nil || ca.LastCompletionTriggeredTime != nil ||
		!ca.LastInitiationTime.AsTime().Equal(t1) {
		t.Fatalf("after the complete succeeded: %v", ca)
	}
	// The patch sets what the status has and removes what it does not.
	var patch map[string]map[string]map[string]any
	b, _ := json.Marshal(credentialsPatch(s))
	if err := json.Unmarshal(b, &patch); err != nil {
		t.Fatal(err)
	}
	caPatch := patch["rotation"]["certificateAuthorities"]
	if caPatch["phase"] != phaseCompleted || caPatch["lastInitiationFinishedTime"] != nil || caPatch["lastCompletionTime"] == nil {
		t.Fatalf("patch of the CA rotation: %v", caPatch)
	}
	if _, ok := caPatch["lastCompletionTriggeredTime"]; !ok {
		t.Fatal("the patch does not remove lastCompletionTriggeredTime")
	}
}

// TestRotationSSHAccess: a shoot without SSH access gets no SSH keypair rotation, and loses the one it had.
func TestRotationSSHAccess(t *testing.T) {
	s := rotationShoot("rotate-ssh-keypair")
	s.Spec.Provider.WorkersSettings = &corev1beta1.WorkersSettings{SshAccess: &corev1beta1.SSHAccess{Enabled: proto.Bool(false)}}
	startRotations(s, time.Now())
	if s.GetStatus().GetCredentials().GetRotation().GetSshKeypair() != nil {
		t.Fatal("an SSH keypair rotation started without SSH access")
	}
	rotationOf(s).SshKeypair = &corev1beta1.ShootSSHKeypairRotation{}
	finishRotations(s, time.Now())
	if s.Status.Credentials.Rotation.SshKeypair != nil {
		t.Fatal("the SSH keypair rotation stays without SSH access")
	}
	if w := rotationWant(s); w.SSHKeypair != nil {
		t.Fatal("a shoot without SSH access wants a keypair")
	}
}

func TestRemainingOperations(t *testing.T) {
	for in, want := range map[string]string{
		"reconcile": "", "rotate-credentials-start": "", "rotate-ssh-keypair;reconcile": "", "maintain": "maintain",
		"rotate-ca-start;maintain": "maintain", "": "",
	} {
		if got := remainingOperations(in); got != want {
			t.Errorf("remainingOperations(%q) = %q, want %q", in, got, want)
		}
	}
}
