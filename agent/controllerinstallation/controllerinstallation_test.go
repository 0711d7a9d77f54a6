package controllerinstallation_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/trellis-dev/trellis/agent"
	"github.com/trellis-dev/trellis/agent/controllerinstallation"
	"github.com/trellis-dev/trellis/agent/helmrelease"
	"github.com/trellis-dev/trellis/deploy/charts"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	gcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/test/agenttest"
	"github.com/trellis-dev/trellis/test/ocitest"
	"github.com/trellis-dev/trellis/test/seedtest"
)

// The tests run the controllers against real parts (test/agenttest): a hub (whose leader creates and deletes the
// ControllerInstallations), the package's shared seed kube-apiserver with kube-controller-manager's deployment and
// namespace controllers, a real agent (controllers off) that gives the controllers their connection and synced
// cache, and real Helm releases.
func TestMain(m *testing.M) { agenttest.Main(m) }

// testChart is a chart whose Deployment has .Values.replicas replicas and whose ConfigMap records the injected
// values; broken adds a template that does not parse.
func testChart(t *testing.T, broken bool) []byte {
	t.Helper()
	fsys := fstest.MapFS{
		"ext/Chart.yaml":  {Data: []byte("apiVersion: v2\nname: ext\nversion: 0.1.0\n")},
		"ext/values.yaml": {Data: []byte("replicas: 1\nmessage: hello\n")},
		"ext/templates/configmap.yaml": {Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: ext-injected
data:
  message: {{ .Values.message | quote }}
  seed: {{ .Values.gardener.seed.name | quote }}
  seedProvider: {{ .Values.gardener.seed.provider | quote }}
  ingressDomain: {{ .Values.gardener.seed.ingressDomain | quote }}
  seedSpecProvider: {{ .Values.gardener.seed.spec.provider.type | quote }}
  garden: {{ .Values.gardener.garden.clusterIdentity | quote }}
  version: {{ .Values.gardener.version | quote }}
`)},
		"ext/templates/deployment.yaml": {Data: []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: ext
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {app: ext}
  template:
    metadata:
      labels: {app: ext}
    spec:
      containers:
      - name: ext
        image: example.com/ext:0.1.0
`)},
	}
	if broken {
		fsys["ext/templates/broken.yaml"] = &fstest.MapFile{Data: []byte("data: {{ .Values.message | nosuchfunction }}\n")}
	}
	archive, err := charts.ArchiveDir(fsys, "ext")
	if err != nil {
		t.Fatal(err)
	}
	return archive
}

type env struct {
	t    *testing.T
	h    *agenttest.Hub
	s    *agenttest.Seed
	regs corev1beta1.ControllerRegistrationServiceClient
	cds  gcorev1.ControllerDeploymentServiceClient
	cis  corev1beta1.ControllerInstallationServiceClient
	rels *helmrelease.Manager
}

func start(t *testing.T) *env {
	t.Helper()
	h := agenttest.StartHub(t)
	s := h.StartSeed(t, "local", agenttest.SeedSpec, seedtest.StartShared(t))
	rels, err := helmrelease.New(helmrelease.Config{REST: s.Cluster.Config})
	if err != nil {
		t.Fatal(err)
	}
	// The required controller watches the extension kinds through informers, as in the agent.
	cl, err := cluster.New(s.Cluster.Config, func(o *cluster.Options) { o.Scheme = agent.Scheme() })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = cl.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	agenttest.RunController(t, func() (agenttest.Runner, error) {
		return controllerinstallation.New(controllerinstallation.Config{Base: s.Base(100*time.Millisecond, 2*time.Second),
			Releases: rels, Version: "v1.2.3-test", HealthPoll: 200 * time.Millisecond,
			DeletionPoll: 200 * time.Millisecond})
	})
	agenttest.RunController(t, func() (agenttest.Runner, error) {
		return controllerinstallation.NewRequired(controllerinstallation.RequiredConfig{SeedName: "local", Cache: s.Cache, Hub: s.Conn,
			Informers: cl.GetCache(), Log: agenttest.Logger()})
	})
	return &env{t: t, h: h, s: s, rels: rels,
		regs: corev1beta1.NewControllerRegistrationServiceClient(h.Admin),
		cds:  gcorev1.NewControllerDeploymentServiceClient(h.Admin),
		cis:  corev1beta1.NewControllerInstallationServiceClient(h.Admin)}
}

// register registers extension type typ with policy, deployed with the chart and values.
func (e *env) register(name, typ, policy string, chart []byte, values string) {
	e.t.Helper()
	e.registerHelm(name, typ, policy, &gcorev1.HelmControllerDeployment{RawChart: chart, Values: &metav1.RawExtension{Raw: []byte(values)}})
}

// registerHelm registers extension type typ with policy, deployed with helm.
func (e *env) registerHelm(name, typ, policy string, helm *gcorev1.HelmControllerDeployment) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.cds.Create(ctx, &gcorev1.ControllerDeployment{ApiVersion: "core.gardener.cloud/v1", Kind: "ControllerDeployment",
		Metadata: &metav1.ObjectMeta{Name: name}, Helm: helm}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.regs.Create(ctx, &corev1beta1.ControllerRegistration{ApiVersion: "core.gardener.cloud/v1beta1", Kind: "ControllerRegistration",
		Metadata: &metav1.ObjectMeta{Name: name},
		Spec: &corev1beta1.ControllerRegistrationSpec{
			Resources:  []*corev1beta1.ControllerResource{{Kind: "Extension", Type: typ}},
			Deployment: &corev1beta1.ControllerRegistrationDeployment{Policy: proto.String(policy), DeploymentRefs: []*corev1beta1.DeploymentRef{{Name: name}}},
		}}); err != nil {
		e.t.Fatal(err)
	}
}

// installation waits for the seed's installation of registration reg for which cond holds.
func (e *env) installation(reg, what string, cond func(*corev1beta1.ControllerInstallation) bool) *corev1beta1.ControllerInstallation {
	e.t.Helper()
	var found *corev1beta1.ControllerInstallation
	agenttest.Eventually(e.t, what, func() bool {
		list, err := e.cis.List(context.Background(), &metav1.ListRequest{})
		if err != nil {
			return false
		}
		for _, ci := range list.GetItems() {
			if ci.GetSpec().GetRegistrationRef().GetName() == reg && ci.GetSpec().GetSeedRef().GetName() == "local" && cond(ci) {
				found = ci
				return true
			}
		}
		return false
	})
	return found
}

func condition(ci *corev1beta1.ControllerInstallation, typ string) *metav1.Condition {
	for _, c := range ci.GetStatus().GetConditions() {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

// has reports whether every condition given as "Type=Status/Reason" holds.
func has(ci *corev1beta1.ControllerInstallation, conds ...string) bool {
	for _, want := range conds {
		typ, rest, _ := strings.Cut(want, "=")
		st, reason, _ := strings.Cut(rest, "/")
		c := condition(ci, typ)
		if c.GetStatus() != st || (reason != "" && c.GetReason() != reason) {
			return false
		}
	}
	return true
}

func (e *env) updateDeployment(name string, mutate func(*gcorev1.ControllerDeployment)) {
	e.t.Helper()
	cd, err := e.cds.Get(context.Background(), &metav1.GetRequest{Name: name})
	if err != nil {
		e.t.Fatal(err)
	}
	mutate(cd)
	if _, err := e.cds.Update(context.Background(), cd); err != nil {
		e.t.Fatal(err)
	}
}

// TestInstallUpgradeHealthAndUninstall follows one installation through its life: installed with the injected
// values, unhealthy while its Deployment cannot run (the test seed has no nodes), healthy when scaled to zero by a
// values change (an upgrade), invalid with a broken chart (the running release is kept), required while extension
// objects of its type exist, and uninstalled when the hub deletes it.
func TestInstallUpgradeHealthAndUninstall(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	e.register("ext", "test-ext", "Always", testChart(t, false), `{"message":"first"}`)

	ci := e.installation("ext", "an installation that is valid and installed but not healthy", func(ci *corev1beta1.ControllerInstallation) bool {
		return has(ci, "Valid=True/RegistrationValid", "Installed=True/InstallationSuccessful", "Healthy=False/ControllerNotHealthy", "Progressing=True/ControllerNotRolledOut")
	})
	if !slices.Contains(ci.GetMetadata().GetFinalizers(), controllerinstallation.Finalizer) {
		t.Errorf("finalizers %v lack %s", ci.GetMetadata().GetFinalizers(), controllerinstallation.Finalizer)
	}
	if msg := condition(ci, "Healthy").GetMessage(); !strings.Contains(msg, "ext") {
		t.Errorf("Healthy message %q does not name the Deployment", msg)
	}
	ns := controllerinstallation.Namespace(ci.GetMetadata().GetName())
	var namespace corev1.Namespace
	if err := e.s.Client.Get(ctx, client.ObjectKey{Name: ns}, &namespace); err != nil {
		t.Fatal(err)
	}
	if namespace.Labels["gardener.cloud/role"] != "extension" || namespace.Labels["controllerregistration.core.gardener.cloud/name"] != "ext" {
		t.Errorf("namespace labels %v", namespace.Labels)
	}

	// The release carries the deployment's values merged with the injected gardener block.
	identity, err := kcorev1.NewConfigMapServiceClient(e.h.Admin).Get(ctx, &metav1.GetRequest{Namespace: "kube-system", Name: "cluster-identity"})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := e.rels.Get(ctx, "ext", ns)
	if err != nil || rel == nil {
		t.Fatalf("release ext in %s: %v %v", ns, rel, err)
	}
	for _, want := range []string{`message: "first"`, `seed: "local"`, `seedProvider: "local"`, `ingressDomain: "ingress.local.seed.example.com"`,
		`seedSpecProvider: "local"`, fmt.Sprintf("garden: %q", identity.GetData()["cluster-identity"]), `version: "v1.2.3-test"`} {
		if !strings.Contains(rel.Manifest, want) {
			t.Errorf("release manifest lacks %s:\n%s", want, rel.Manifest)
		}
	}
	firstRevision := rel.Version

	// A values change upgrades the release; scaled to zero, the controller is healthy and rolled out.
	e.updateDeployment("ext", func(cd *gcorev1.ControllerDeployment) {
		cd.Helm.Values.Raw = []byte(`{"message":"second","replicas":0}`)
	})
	e.installation("ext", "a healthy installation after the upgrade", func(ci *corev1beta1.ControllerInstallation) bool {
		return has(ci, "Valid=True", "Installed=True", "Healthy=True/ControllerHealthy", "Progressing=False/ControllerRolledOut")
	})
	rel, err = e.rels.Get(ctx, "ext", ns)
	if err != nil || rel.Version <= firstRevision || !strings.Contains(rel.Manifest, `message: "second"`) {
		t.Fatalf("after the values change: revision %d (was %d), err %v, manifest:\n%s", rel.Version, firstRevision, err, rel.Manifest)
	}
	upgraded := rel.Version
	// Nothing changes: no new revision.
	time.Sleep(time.Second)
	if rel, _ = e.rels.Get(ctx, "ext", ns); rel.Version != upgraded {
		t.Errorf("revision moved from %d to %d without a change", upgraded, rel.Version)
	}

	// A broken chart: Valid=False with Helm's message; the release stays as it was.
	e.updateDeployment("ext", func(cd *gcorev1.ControllerDeployment) { cd.Helm.RawChart = testChart(t, true) })
	ci = e.installation("ext", "Valid=False for the broken chart", func(ci *corev1beta1.ControllerInstallation) bool {
		return has(ci, "Valid=False/ChartCannotBeRendered")
	})
	if msg := condition(ci, "Valid").GetMessage(); !strings.Contains(msg, "nosuchfunction") {
		t.Errorf("Valid message %q does not carry Helm's rendering error", msg)
	}
	if rel, _ = e.rels.Get(ctx, "ext", ns); rel.Version != upgraded {
		t.Errorf("the broken chart changed the release: revision %d, want %d", rel.Version, upgraded)
	}
	e.updateDeployment("ext", func(cd *gcorev1.ControllerDeployment) { cd.Helm.RawChart = testChart(t, false) })
	e.installation("ext", "Valid=True again", func(ci *corev1beta1.ControllerInstallation) bool { return has(ci, "Valid=True/RegistrationValid") })

	// Required follows the extension objects of the registration's kind/type in the seed.
	e.installation("ext", "Required=False without extension objects", func(ci *corev1beta1.ControllerInstallation) bool {
		return has(ci, "Required=False/NoExtensionObjects")
	})
	objNS := e.s.Cluster.Namespace(t)
	ext := &extensionsv1alpha1.Extension{ObjectMeta: kmetav1.ObjectMeta{Namespace: objNS, Name: "obj"}}
	ext.Spec.Type = "test-ext"
	if err := e.s.Client.Create(ctx, ext); err != nil {
		t.Fatal(err)
	}
	e.installation("ext", "Required=True with an extension object", func(ci *corev1beta1.ControllerInstallation) bool {
		return has(ci, "Required=True/ExtensionObjectsExist") && strings.Contains(condition(ci, "Required").GetMessage(), "Extension/test-ext")
	})

	// The hub no longer wants the registration on the seed, but its extension object still exists: the installation
	// stays. Once the object is gone, the hub deletes the installation and the agent uninstalls it.
	reg, err := e.regs.Get(ctx, &metav1.GetRequest{Name: "ext"})
	if err != nil {
		t.Fatal(err)
	}
	reg.Spec.Deployment.Policy = proto.String("OnDemand")
	if _, err := e.regs.Update(ctx, reg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if cur, err := e.cis.Get(ctx, &metav1.GetRequest{Name: ci.GetMetadata().GetName()}); err != nil || cur.GetMetadata().GetDeletionTimestamp() != nil {
		t.Fatalf("a Required installation was deleted: %v %v", cur.GetMetadata().GetDeletionTimestamp(), err)
	}
	if err := e.s.Client.Delete(ctx, ext); err != nil {
		t.Fatal(err)
	}
	agenttest.Eventually(t, "the installation to go", func() bool {
		_, err := e.cis.Get(ctx, &metav1.GetRequest{Name: ci.GetMetadata().GetName()})
		return status.Code(err) == codes.NotFound
	})
	if rel, err := e.rels.Get(ctx, "ext", ns); err != nil || rel != nil {
		t.Errorf("release after the deletion: %v %v", rel, err)
	}
	if err := e.s.Client.Get(ctx, client.ObjectKey{Name: ns}, &namespace); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after the deletion: %v", ns, err)
	}
}

// TestOCIChart: a chart pulled from an OCI registry that needs the deployment's CA bundle and pull secret (Secrets in
// the hub's namespace garden, which reach the agent through the seed's graph); a digest that the registry does not
// have makes the installation invalid.
func TestOCIChart(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	reg := ocitest.Start(t)
	digest := reg.Push(t, testChart(t, false), "charts/ext", "0.1.0")
	e.h.Store(t, agenttest.Secret("garden", "registry-ca", map[string]string{"bundle.crt": string(reg.CABundle)}),
		agenttest.Secret("garden", "registry-pull", map[string]string{".dockerconfigjson": string(ocitest.DockerConfigJSON(reg.Host, ocitest.User, ocitest.Password))}))
	oci := &gcorev1.OCIRepository{Repository: proto.String(reg.Host + "/charts/ext"), Tag: proto.String("0.1.0"), Digest: proto.String(digest),
		PullSecretRef: &metav1.LocalObjectReference{Name: "registry-pull"}, CaBundleSecretRef: &metav1.LocalObjectReference{Name: "registry-ca"}}
	e.registerHelm("oci-ext", "oci-ext", "Always", &gcorev1.HelmControllerDeployment{OciRepository: oci,
		Values: &metav1.RawExtension{Raw: []byte(`{"message":"from oci","replicas":0}`)}})

	ci := e.installation("oci-ext", "the OCI chart installed", func(ci *corev1beta1.ControllerInstallation) bool {
		return has(ci, "Valid=True/RegistrationValid", "Installed=True/InstallationSuccessful", "Healthy=True")
	})
	rel, err := e.rels.Get(ctx, "oci-ext", controllerinstallation.Namespace(ci.GetMetadata().GetName()))
	if err != nil || rel == nil || !strings.Contains(rel.Manifest, `message: "from oci"`) {
		t.Fatalf("release of the OCI chart: %v %v", rel, err)
	}

	e.updateDeployment("oci-ext", func(cd *gcorev1.ControllerDeployment) {
		cd.Helm.OciRepository.Digest = proto.String("sha256:" + strings.Repeat("0", 64))
	})
	ci = e.installation("oci-ext", "Valid=False for a digest the registry lacks", func(ci *corev1beta1.ControllerInstallation) bool {
		return has(ci, "Valid=False/OCIChartCannotBePulled")
	})
	t.Logf("Valid: %s", condition(ci, "Valid").GetMessage())
}
