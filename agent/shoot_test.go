package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1k "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/config"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
	"github.com/trellis-dev/trellis/test/agentsim"
	"github.com/trellis-dev/trellis/test/agenttest"
)

// stubOf is the stub extension (agenttest.Stub) of these tests: for every kind of type "local" it reports success at
// once and sets the outputs the agent forwards (the Infrastructure's providerStatus, the provision OSC's cloud config
// secret). The end-to-end tests run the real provider-local; this keeps the agent's package tests about the agent.
func stubOf[T extensionsv1alpha1.Object](newObj func() T, set func(T)) func(manager.Manager) error {
	return agenttest.Stub(newObj, set)
}

const infraStatus = `{"apiVersion":"local.provider.extensions.gardener.cloud/v1alpha1","kind":"InfrastructureStatus","network":"net-1"}`

// startStubExtension runs the stub extension against the seed until the test ends.
func startStubExtension(t *testing.T, e *env) {
	t.Helper()
	agenttest.StartExtensions(t, e.seed.Config,
		stubOf(func() *extensionsv1alpha1.Infrastructure { return &extensionsv1alpha1.Infrastructure{} }, func(o *extensionsv1alpha1.Infrastructure) {
			o.Status.ProviderStatus = &runtime.RawExtension{Raw: []byte(infraStatus)}
		}),
		stubOf(func() *extensionsv1alpha1.OperatingSystemConfig { return &extensionsv1alpha1.OperatingSystemConfig{} }, func(o *extensionsv1alpha1.OperatingSystemConfig) {
			if o.Spec.Purpose == extensionsv1alpha1.OperatingSystemConfigPurposeProvision {
				o.Status.CloudConfig = &extensionsv1alpha1.CloudConfig{SecretRef: corev1.SecretReference{Name: "osc-result-" + o.Name, Namespace: o.Namespace}}
			}
		}),
		stubOf(func() *extensionsv1alpha1.ControlPlane { return &extensionsv1alpha1.ControlPlane{} }, func(o *extensionsv1alpha1.ControlPlane) {
			o.Status.Conditions = []extensionsv1alpha1.Condition{{Type: extensionsv1alpha1.ShootControlPlaneHealthy, Status: extensionsv1alpha1.ConditionTrue,
				LastTransitionTime: metav1k.Now(), LastUpdateTime: metav1k.Now(), Reason: "HealthCheckSuccessful", Message: "ok"}}
		}),
		stubOf(func() *extensionsv1alpha1.Worker { return &extensionsv1alpha1.Worker{} }, nil),
		stubOf(func() *extensionsv1alpha1.Network { return &extensionsv1alpha1.Network{} }, nil),
		stubOf(func() *extensionsv1alpha1.DNSRecord { return &extensionsv1alpha1.DNSRecord{} }, nil),
		stubOf(func() *extensionsv1alpha1.ContainerRuntime { return &extensionsv1alpha1.ContainerRuntime{} }, nil),
		stubOf(func() *extensionsv1alpha1.Extension { return &extensionsv1alpha1.Extension{} }, nil),
	)
}

// flowNamespace is the namespace of project "dev", where the flow tests' shoots live.
const flowNamespace = "garden-dev"

// flowFixtures are what admission checks the shoots against: project dev and a cloud profile with the shoots'
// Kubernetes version, machine type and image.
func flowFixtures() []store.Object {
	cp := agentsim.CloudProfile("local")
	cp.Spec.Kubernetes = &corev1beta1.KubernetesSettings{Versions: []*corev1beta1.ExpirableVersion{{Version: "1.31.1"}}}
	cp.Spec.MachineTypes = []*corev1beta1.MachineType{{Name: "local", Cpu: "2", Memory: "4Gi"}}
	cp.Spec.MachineImages = []*corev1beta1.MachineImage{{Name: "local", Versions: []*corev1beta1.MachineImageVersion{{Version: "1.0.0",
		Cri: []*corev1beta1.CRI{{Name: "containerd"}}}}}}
	cp.Spec.Regions = []*corev1beta1.Region{{Name: "local"}}
	return []store.Object{
		&kcorev1.Namespace{ApiVersion: "v1", Kind: "Namespace", Metadata: &metav1.ObjectMeta{Name: flowNamespace}},
		&corev1beta1.Project{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "Project", Metadata: &metav1.ObjectMeta{Name: "dev"},
			Spec: &corev1beta1.ProjectSpec{Namespace: proto.String(flowNamespace)}},
		cp,
	}
}

// flowShoot is a shoot with a worker pool, networking, a DNS domain, an extension and a container runtime.
func flowShoot(name string) *corev1beta1.Shoot {
	s := agentsim.Shoot(flowNamespace, name, "local", name, "local")
	s.Spec.Kubernetes = &corev1beta1.Kubernetes{Version: "1.31.1"}
	// Networks disjoint from the seed's (the scheduler checks them), as the local setup's.
	s.Spec.Networking = &corev1beta1.Networking{Type: proto.String("local"), Nodes: proto.String("10.10.0.0/16"),
		Pods: proto.String("10.3.0.0/16"), Services: proto.String("10.4.0.0/16")}
	s.Spec.Dns = &corev1beta1.DNS{Domain: proto.String(name + ".garden.local.example.com")}
	s.Spec.Extensions = []*corev1beta1.Extension{{Type: "local"}}
	s.Spec.Provider.Workers = []*corev1beta1.Worker{{Name: "pool", Minimum: proto.Int32(1), Maximum: proto.Int32(2),
		Machine: &corev1beta1.Machine{Type: "local", Image: &corev1beta1.ShootMachineImage{Name: "local", Version: proto.String("1.0.0")}},
		Cri:     &corev1beta1.CRI{Name: "containerd", ContainerRuntimes: []*corev1beta1.ContainerRuntime{{Type: "local"}}}}}
	return s
}

// shootControllersConfig turns the agent's controllers on with fast retries.
func (e *env) shootConfig(t *testing.T) *config.AgentConfiguration {
	t.Helper()
	cfg := e.config(t)
	cfg.Controllers.Disabled = false
	d := func(v time.Duration) *metav1k.Duration { return &metav1k.Duration{Duration: v} }
	cfg.Controllers.Shoot.RetryMinDelay = d(200 * time.Millisecond)
	cfg.Controllers.Shoot.RetryMaxDelay = d(time.Second)
	cfg.Controllers.Shoot.ExtensionErrorThreshold = d(time.Second)
	return cfg
}

// seedObject is the Seed "local" on e's hub.
func seedObject(t *testing.T, e *env) *corev1beta1.Seed {
	t.Helper()
	o, err := e.hub.Collection(t, "core.gardener.cloud", "seeds").Get(context.Background(), "", "local")
	if err != nil {
		t.Fatal(err)
	}
	return o.(*corev1beta1.Seed)
}

func (e *env) shoot(t *testing.T, name string) *corev1beta1.Shoot {
	t.Helper()
	o, err := e.hub.Collection(t, "core.gardener.cloud", "shoots").Get(context.Background(), flowNamespace, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.(*corev1beta1.Shoot)
}

func lastOp(s *corev1beta1.Shoot) string {
	lo := s.GetStatus().GetLastOperation()
	return fmt.Sprintf("%s %s %d%% (%s)", lo.GetType(), lo.GetState(), lo.GetProgress(), lo.GetDescription())
}

// createShoot creates a shoot through the hub's REST API, with admission and defaults, as users do.
func (e *env) createShoot(t *testing.T, s *corev1beta1.Shoot) {
	t.Helper()
	body, err := kjson.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	code, out := e.hub.Do(t, "POST", "/apis/core.gardener.cloud/v1beta1/namespaces/"+s.GetMetadata().GetNamespace()+"/shoots", body)
	if code != 201 {
		t.Fatalf("create shoot: %d %s", code, out)
	}
}

// TestShootFlows drives one shoot through create, a spec change and delete with the stub extension: the objects the
// agent writes into the seed, the order-dependent outputs it forwards, and what it reports on the shoot.
func TestShootFlows(t *testing.T) {
	e := newEnv(t)
	shoot := flowShoot("web")
	e.hub.Store(t, flowFixtures()...)
	e.hub.Store(t, agentsim.Secret(flowNamespace, "web"), agentsim.SecretBinding(flowNamespace, "web"))
	shoot.Spec.SeedName = nil // the hub's scheduler places it once the seed is ready
	e.createShoot(t, shoot)
	ta := agenttest.StartAgent(t, e.shootConfig(t))
	agenttest.Eventually(t, "the agent installed the CRDs", func() bool { return ta.Status().CRDsInstalled })
	startStubExtension(t, e)
	seed, err := client.New(e.seed.Config, client.Options{Scheme: agent.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := "shoot--dev--web"
	ctx := context.Background()

	var s *corev1beta1.Shoot
	agenttest.Eventually(t, "the shoot is created", func() bool {
		s = e.shoot(t, "web")
		lo := s.GetStatus().GetLastOperation()
		return lo.GetState() == "Succeeded" && s.GetStatus().GetObservedGeneration() == s.GetMetadata().GetGeneration()
	})
	if lo := s.GetStatus().GetLastOperation(); lo.GetType() != "Create" {
		t.Errorf("lastOperation %s, want Create (a reconcile ran that nothing asked for)", lastOp(s))
	}
	if got := s.GetStatus(); got.GetLastOperation().GetProgress() != 100 || got.GetObservedGeneration() != s.GetMetadata().GetGeneration() ||
		got.GetSeedName() != "local" || got.GetTechnicalId() != ns || len(got.GetLastErrors()) != 0 {
		t.Fatalf("status after create: %v", got)
	}
	// The agent that operated the shoot names itself, as gardenlet does (the Seed's status.gardener is the same).
	if g, sg := s.GetStatus().GetGardener(), seedObject(t, e).GetStatus().GetGardener(); g.GetId() == "" || g.GetName() == "" || g.GetVersion() == "" || !proto.Equal(g, sg) {
		t.Errorf("status.gardener %v, want the agent's identity as the seed shows it (%v)", g, sg)
	}
	if !contains(s.GetMetadata().GetFinalizers(), "gardener") {
		t.Fatalf("finalizers %v, want gardener", s.GetMetadata().GetFinalizers())
	}
	conds := map[string]string{}
	for _, c := range s.GetStatus().GetConditions() {
		conds[c.GetType()] = c.GetStatus()
	}
	for _, typ := range []string{"APIServerAvailable", "ControlPlaneHealthy", "EveryNodeReady", "SystemComponentsHealthy", "ObservabilityComponentsHealthy"} {
		if conds[typ] != "True" {
			t.Errorf("condition %s = %q, want True (all: %v)", typ, conds[typ], conds)
		}
	}
	cp := &extensionsv1alpha1.ControlPlane{}
	if err := seed.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, cp); err != nil {
		t.Fatal(err)
	}
	if cp.Spec.InfrastructureProviderStatus == nil || string(cp.Spec.InfrastructureProviderStatus.Raw) != infraStatus {
		t.Errorf("controlplane infrastructureProviderStatus = %v, want the Infrastructure's providerStatus", cp.Spec.InfrastructureProviderStatus)
	}
	w := &extensionsv1alpha1.Worker{}
	if err := seed.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, w); err != nil {
		t.Fatal(err)
	}
	if len(w.Spec.Pools) != 1 || w.Spec.Pools[0].Maximum != 2 || w.Spec.Pools[0].UserDataSecretRef.Name == "" || w.Spec.Pools[0].UserDataSecretRef.Key != "cloud_config" {
		t.Fatalf("worker pools %+v", w.Spec.Pools)
	}
	for _, obj := range []client.Object{&extensionsv1alpha1.Cluster{ObjectMeta: metav1k.ObjectMeta{Name: ns}},
		&extensionsv1alpha1.Infrastructure{ObjectMeta: metav1k.ObjectMeta{Namespace: ns, Name: "web"}},
		&extensionsv1alpha1.Network{ObjectMeta: metav1k.ObjectMeta{Namespace: ns, Name: "web"}},
		&extensionsv1alpha1.DNSRecord{ObjectMeta: metav1k.ObjectMeta{Namespace: ns, Name: "web-external"}},
		&extensionsv1alpha1.Extension{ObjectMeta: metav1k.ObjectMeta{Namespace: ns, Name: "local"}},
		&extensionsv1alpha1.ContainerRuntime{ObjectMeta: metav1k.ObjectMeta{Namespace: ns, Name: "local-pool"}},
		&corev1.Secret{ObjectMeta: metav1k.ObjectMeta{Namespace: ns, Name: "cloudprovider"}}} {
		if err := seed.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Errorf("%T %s: %v", obj, obj.GetName(), err)
		}
	}

	// A new generation is reconciled.
	gen := s.GetMetadata().GetGeneration()
	upd := proto.Clone(s).(*corev1beta1.Shoot)
	upd.Spec.Provider.Workers[0].Maximum = proto.Int32(5)
	upd.Metadata.Generation = gen + 1
	if _, err := e.hub.Collection(t, "core.gardener.cloud", "shoots").Update(ctx, upd); err != nil {
		t.Fatal(err)
	}
	agenttest.Eventually(t, "the new generation is reconciled", func() bool {
		s = e.shoot(t, "web")
		return s.GetStatus().GetObservedGeneration() == gen+1 && s.GetStatus().GetLastOperation().GetState() == "Succeeded"
	})
	if got := s.GetStatus().GetLastOperation().GetType(); got != "Reconcile" {
		t.Errorf("lastOperation type %s, want Reconcile", got)
	}
	if err := seed.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, w); err != nil || w.Spec.Pools[0].Maximum != 5 {
		t.Fatalf("worker after the update: %v %+v", err, w.Spec.Pools)
	}

	// Delete: every extension object and the namespace go, then the finalizer and the shoot.
	if _, _, err := e.hub.Collection(t, "core.gardener.cloud", "shoots").Delete(ctx, flowNamespace, "web", nil); err != nil {
		t.Fatal(err)
	}
	agenttest.Eventually(t, "the shoot is gone", func() bool { return e.shoot(t, "web") == nil })
	nsObj := &corev1.Namespace{}
	if err := seed.Get(ctx, client.ObjectKey{Name: ns}, nsObj); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s: %v (phase %s), want gone", ns, err, nsObj.Status.Phase)
	}
	cl := &extensionsv1alpha1.Cluster{}
	if err := seed.Get(ctx, client.ObjectKey{Name: ns}, cl); !apierrors.IsNotFound(err) {
		t.Errorf("cluster %s: %v, want gone", ns, err)
	}
	_ = ta
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
