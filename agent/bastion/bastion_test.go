package bastion_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/crypto/ssh"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/bastion"
	"github.com/trellis-dev/trellis/extsdk"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/controller"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// The tests run the controller against real parts (test/agenttest): a hub, the package's shared seed kube-apiserver
// with the extension CRDs, a real agent (controllers off) that gives the controller its mTLS connection and its
// synced cache, and an extension built with extsdk/controller for type "test".
func TestMain(m *testing.M) { agenttest.Main(m) }

type extBastion = extensionsv1alpha1.Bastion

// bastionActuator is the "test" extension's Bastion actuator: it records what it was asked for and reports a
// public IP.
type bastionActuator struct {
	mu       sync.Mutex
	userData map[string]string // bastion → the user data it was reconciled with
	deleted  map[string]bool
}

func (a *bastionActuator) Reconcile(_ context.Context, _ logr.Logger, obj *extBastion, _ *extsdk.Cluster) error {
	a.mu.Lock()
	a.userData[obj.Name] = string(obj.Spec.UserData)
	a.mu.Unlock()
	obj.Status.Ingress = &corev1.LoadBalancerIngress{IP: "192.0.2.10", Hostname: obj.Name + ".bastion.example.com"}
	return nil
}

func (a *bastionActuator) Delete(_ context.Context, _ logr.Logger, obj *extBastion, _ *extsdk.Cluster) error {
	a.mu.Lock()
	a.deleted[obj.Name] = true
	a.mu.Unlock()
	return nil
}

func (a *bastionActuator) wasDeleted(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.deleted[name]
}

func sshKey(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + " user@example"
}

func newBastion(name, shoot, key string) *operationsv1alpha1.Bastion {
	return &operationsv1alpha1.Bastion{ApiVersion: "operations.gardener.cloud/v1alpha1", Kind: "Bastion",
		Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: name},
		Spec: &operationsv1alpha1.BastionSpec{ShootRef: &metav1.LocalObjectReference{Name: shoot}, SeedName: proto.String("local"),
			SshPublicKey: key, Ingress: []*operationsv1alpha1.BastionIngressPolicy{{IpBlock: &operationsv1alpha1.IPBlock{Cidr: "198.51.100.0/24"}}}}}
}

// A Bastion is deployed into its shoot's control-plane namespace with the user's key and the allowed CIDRs, and
// reported ready with the extension's ingress; when it expires the hub deletes it and it loses its extension object
// before its finalizer, as a Bastion deleted by its user does.
func TestBastion(t *testing.T) {
	h := agenttest.StartHub(t)
	s := h.StartSeed(t, "local", agenttest.SeedSpec, seedtest.StartShared(t))
	techID := fmt.Sprintf("shoot--garden--ssh-%d", time.Now().UnixNano()%1e9) // unique in the package's shared seed
	s.CreateNamespace(t, techID)
	h.Store(t, &corev1beta1.Shoot{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot",
		Metadata: &metav1.ObjectMeta{Namespace: "garden", Name: "ssh"},
		// A worker pool: Gardener admits Bastions only for shoots with workers that allow SSH access.
		Spec: &corev1beta1.ShootSpec{SeedName: proto.String("local"), Region: "local",
			Provider: &corev1beta1.Provider{Type: "test", Workers: []*corev1beta1.Worker{{Name: "pool"}}}},
		Status: &corev1beta1.ShootStatus{TechnicalId: techID}})
	key := sshKey(t)
	bc := operationsv1alpha1.NewBastionServiceClient(h.Admin)
	for _, name := range []string{"expiring", "deleted"} {
		if _, err := bc.Create(context.Background(), newBastion(name, "ssh", key)); err != nil {
			t.Fatal(err)
		}
	}
	a := &bastionActuator{userData: map[string]string{}, deleted: map[string]bool{}}
	agenttest.StartExtensions(t, s.Cluster.Config,
		agenttest.Extension(controller.AddArgs[*extBastion]{Actuator: a, Type: "test", NewObject: func() *extBastion { return &extBastion{} }}))
	agenttest.RunController(t, func() (agenttest.Runner, error) {
		return bastion.New(bastion.Config{Base: s.Base(50*time.Millisecond, time.Second), PollInterval: 50 * time.Millisecond})
	})

	get := func(name string) (*operationsv1alpha1.Bastion, error) {
		return bc.Get(context.Background(), &metav1.GetRequest{Namespace: "garden", Name: name})
	}
	waitReady := func(name, st, reason string) *operationsv1alpha1.Bastion {
		t.Helper()
		var b *operationsv1alpha1.Bastion
		agenttest.Eventually(t, fmt.Sprintf("Bastion %s %s=%s (%s)", name, bastion.ConditionReady, st, reason), func() bool {
			var err error
			if b, err = get(name); err != nil {
				return false
			}
			return slices.ContainsFunc(b.GetStatus().GetConditions(), func(c *metav1.Condition) bool {
				return c.GetType() == bastion.ConditionReady && c.GetStatus() == st && c.GetReason() == reason
			})
		})
		return b
	}
	for _, name := range []string{"expiring", "deleted"} {
		b := waitReady(name, "True", "SuccessfullyReconciled")
		if in := b.GetStatus().GetIngress(); in.GetIp() != "192.0.2.10" || in.GetHostname() != name+".bastion.example.com" {
			t.Errorf("%s: status.ingress %v", name, in)
		}
		if b.GetStatus().GetObservedGeneration() != b.GetMetadata().GetGeneration() || !slices.Contains(b.GetMetadata().GetFinalizers(), "gardener") {
			t.Errorf("%s: observedGeneration %d of %d, finalizers %v", name, b.GetStatus().GetObservedGeneration(), b.GetMetadata().GetGeneration(), b.GetMetadata().GetFinalizers())
		}
	}
	ext := &extBastion{}
	if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: techID, Name: "expiring"}, ext); err != nil {
		t.Fatal(err)
	}
	if ext.Spec.Type != "test" || len(ext.Spec.Ingress) != 1 || ext.Spec.Ingress[0].IPBlock.CIDR != "198.51.100.0/24" {
		t.Errorf("extension bastion spec %+v", ext.Spec)
	}
	if !strings.Contains(string(ext.Spec.UserData), key) || !strings.Contains(a.userData["expiring"], key) {
		t.Errorf("the user data does not carry the SSH key:\n%s", ext.Spec.UserData)
	}
	// The API carries the user data base64-encoded, as Gardener's does.
	raw, err := json.Marshal(ext.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "useradd") {
		t.Errorf("userData is not base64 in JSON: %s", raw)
	}

	// Expiry: the hub sets status.expirationTimestamp (here: in the past).
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"expirationTimestamp": time.Now().Add(-time.Second).UTC().Format(time.RFC3339)}})
	if _, err := bc.Patch(context.Background(), &metav1.PatchRequest{Namespace: "garden", Name: "expiring",
		Patch: &metav1.RawExtension{Raw: patch}, PatchType: "application/merge-patch+json", Subresource: "status"}); err != nil {
		t.Fatal(err)
	}
	// The hub's controller-manager deletes an expired Bastion; the agent removes its extension object, then its
	// finalizer.
	agenttest.Eventually(t, "the expired Bastion gone", func() bool {
		_, err := get("expiring")
		return status.Code(err) == codes.NotFound
	})
	if !a.wasDeleted("expiring") {
		t.Error("the extension never deleted the expired bastion")
	}
	if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: techID, Name: "expiring"}, &extBastion{}); !apierrors.IsNotFound(err) {
		t.Errorf("expired bastion's extension object: %v, want NotFound", err)
	}

	// Deletion of a ready Bastion.
	if _, err := bc.Delete(context.Background(), &metav1.DeleteRequest{Namespace: "garden", Name: "deleted"}); err != nil {
		t.Fatal(err)
	}
	agenttest.Eventually(t, "Bastion deleted gone", func() bool {
		_, err := get("deleted")
		return status.Code(err) == codes.NotFound
	})
	if !a.wasDeleted("deleted") {
		t.Error("the extension never deleted the bastion")
	}
	if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: techID, Name: "deleted"}, &extBastion{}); !apierrors.IsNotFound(err) {
		t.Errorf("deleted bastion's extension object: %v, want NotFound", err)
	}
}
