package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/agent/config"
	"github.com/trellis-dev/trellis/deploy/charts"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	"github.com/trellis-dev/trellis/test/landscape"
	"github.com/trellis-dev/trellis/test/timescale"
)

// installationStatus is the part of a ControllerInstallation the test reads.
type installationStatus struct {
	Metadata struct {
		Name              string     `json:"name"`
		DeletionTimestamp *time.Time `json:"deletionTimestamp"`
		Finalizers        []string   `json:"finalizers"`
	} `json:"metadata"`
	Spec struct {
		RegistrationRef struct{ Name string } `json:"registrationRef"`
		SeedRef         struct{ Name string } `json:"seedRef"`
	} `json:"spec"`
	Status struct {
		Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
	} `json:"status"`
}

func (ci *installationStatus) condition(typ string) (status, reason, message string) {
	for _, c := range ci.Status.Conditions {
		if c.Type == typ {
			return c.Status, c.Reason, c.Message
		}
	}
	return "", "", ""
}

// has reports whether every condition given as "Type=Status/Reason" holds.
func (ci *installationStatus) has(conds ...string) bool {
	for _, want := range conds {
		typ, rest, _ := strings.Cut(want, "=")
		st, reason, _ := strings.Cut(rest, "/")
		gotSt, gotReason, _ := ci.condition(typ)
		if gotSt != st || (reason != "" && gotReason != reason) {
			return false
		}
	}
	return true
}

func (ci *installationStatus) String() string {
	var cs []string
	for _, c := range ci.Status.Conditions {
		cs = append(cs, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return fmt.Sprintf("%s (deleting %v) %s", ci.Metadata.Name, ci.Metadata.DeletionTimestamp != nil, strings.Join(cs, " "))
}

const (
	registrationPath = "/apis/core.gardener.cloud/v1beta1/controllerregistrations/" + landscape.ProviderLocalRegistration
	deploymentPath   = "/apis/core.gardener.cloud/v1/controllerdeployments/" + landscape.ProviderLocalRegistration
)

// installations lists the ControllerInstallations of provider-local on seed.
func (r *rest) installations(seed string) []*installationStatus {
	r.t.Helper()
	body := r.must(http.StatusOK, http.MethodGet, "/apis/core.gardener.cloud/v1beta1/controllerinstallations", nil)
	var list struct{ Items []*installationStatus }
	if err := json.Unmarshal(body, &list); err != nil {
		r.t.Fatal(err)
	}
	var out []*installationStatus
	for _, ci := range list.Items {
		if ci.Spec.SeedRef.Name == seed && ci.Spec.RegistrationRef.Name == landscape.ProviderLocalRegistration {
			out = append(out, ci)
		}
	}
	return out
}

// waitInstallation polls until the seed has exactly one installation of provider-local for which cond holds.
func (r *rest) waitInstallation(seed, what string, timeout time.Duration, cond func(*installationStatus) bool) (*installationStatus, time.Duration) {
	r.t.Helper()
	timeout = timescale.Scale(timeout)
	begin := time.Now()
	var last []*installationStatus
	for time.Since(begin) < timeout {
		last = r.installations(seed)
		if len(last) == 1 && cond(last[0]) {
			return last[0], time.Since(begin)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Fatalf("timed out after %v waiting for %s; installations: %v", timeout, what, last)
	return nil, 0
}

// waitGone polls until GET path answers 404.
func (r *rest) waitGone(what, path string, timeout time.Duration) time.Duration {
	r.t.Helper()
	timeout = timescale.Scale(timeout)
	begin := time.Now()
	for time.Since(begin) < timeout {
		if code, _ := r.do(http.MethodGet, path, nil); code == http.StatusNotFound {
			return time.Since(begin)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Fatalf("timed out after %v waiting for %s to go", timeout, what)
	return 0
}

// helmRelease reads the last release of provider-local in namespace ns of the seed, as Helm stores it (nil: none).
func helmRelease(t *testing.T, s *landscape.Seed, ns string) *release.Release {
	t.Helper()
	rel, err := storage.Init(driver.NewSecrets(s.Client.CoreV1().Secrets(ns))).Last(landscape.ProviderLocalRegistration)
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			return nil
		}
		t.Fatal(err)
	}
	return rel
}

// seedCondition reports whether the Seed's condition typ has status st.
func seedCondition(r *rest, seed, typ, st string) bool {
	r.t.Helper()
	var s struct {
		Status struct {
			Conditions []struct{ Type, Status string } `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(r.must(http.StatusOK, http.MethodGet, "/apis/core.gardener.cloud/v1beta1/seeds/"+seed, nil), &s); err != nil {
		r.t.Fatal(err)
	}
	return slices.ContainsFunc(s.Status.Conditions, func(c struct{ Type, Status string }) bool { return c.Type == typ && c.Status == st })
}

// brokenChart is provider-local's chart with a template that does not render.
func brokenChart(t *testing.T) []byte {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "provider-local")
	// Tests run in their package's directory, test/e2e.
	src := os.DirFS(filepath.Join("..", "..", "deploy", "charts", "provider-local"))
	if err := os.CopyFS(dir, src); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "templates", "broken.yaml"), []byte("data: {{ .Values.config.logLevel | nosuchfunction }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archive, err := charts.ArchiveDir(os.DirFS(filepath.Dir(dir)), "provider-local")
	if err != nil {
		t.Fatal(err)
	}
	return archive
}

// TestExtensionRegistration registers provider-local as a real extension, with the ControllerDeployment and
// ControllerRegistration `make generate` writes, on a landscape of real binaries whose seed "edge" needs no
// provider-local by itself (its provider, DNS and ingress are of another type and it has no backup), so that
// provider-local's OnDemand policy shows: no ControllerInstallation until a shoot needs it, one while the shoot
// exists (the agent installs the chart as a Helm release with the injected values; a values change upgrades it),
// none after the last shoot is deleted; one at once with policy Always; Valid=False with the rendering error for a
// broken chart; and the finalizers that hold a deployment and a registration while they are used. The seed has no
// nodes, so the chart runs no replica and the test starts the provider-local binary itself in the installation's
// namespace, as `make up` does. No registration covers the seed's own provider type: the hub logs that, as Gardener
// would fail the seed's reconciliation for it, and deploys what it can.
func TestExtensionRegistration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a landscape of real binaries")
	}
	lightTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(4*time.Minute))
	defer cancel()
	const seed = "edge"
	l := startLandscape(ctx, t, landscape.Config{
		Seeds:                []landscape.SeedConfig{{Name: seed}},
		RequireProviderLocal: true,
		ManualProviderLocal:  true,
		// The seed's own provider, registered without a deployment: the hub refuses a Seed of an unregistered type.
		Registrations:           map[string][]string{"provider-edge": {"ControlPlane/edge", "DNSRecord/edge"}},
		ExtensionErrorThreshold: time.Second,
		AgentMutate: func(_ string, c *config.AgentConfiguration) {
			spec := c.SeedConfig.Seed.Spec
			spec.Provider.Type = "edge"
			spec.Backup = nil
			spec.Dns = &corev1beta1.SeedDNS{Provider: &corev1beta1.SeedDNSProvider{Type: "edge", CredentialsRef: spec.GetDns().GetProvider().GetCredentialsRef()}}
			c.Controllers.Shoot.RetryMinDelay = &kmetav1.Duration{Duration: 500 * time.Millisecond}
			c.Controllers.Shoot.RetryMaxDelay = &kmetav1.Duration{Duration: 2 * time.Second}
		},
	})
	r := newREST(t, l)
	s := l.Seed(seed)

	// The examples but the shoot; provider-local registered with the generated manifests (OnDemand).
	examples, err := landscape.Examples()
	if err != nil {
		t.Fatal(err)
	}
	var shoot map[string]any
	for _, e := range examples {
		if e.Kind.Kind == "Shoot" {
			if err := json.Unmarshal(e.JSON, &shoot); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if code, body := r.do(http.MethodPost, e.Path(), e.JSON); code != http.StatusCreated && code != http.StatusConflict {
			t.Fatalf("create %s: %d %s", e.File, code, body)
		}
	}
	shoot["metadata"].(map[string]any)["name"] = "e2e"
	// The seed's provider is not the shoot's: the scheduler would not place it there (as Gardener's, unless the
	// CloudProfile's seedSelector.providerTypes allows it), so the shoot names its seed.
	shoot["spec"].(map[string]any)["seedName"] = seed
	if err := l.RegisterProviderLocal(ctx, landscape.DefaultProviderLocalValues()); err != nil {
		t.Fatal(err)
	}
	var reg struct {
		Metadata struct{ Finalizers []string } `json:"metadata"`
		Spec     struct {
			Deployment struct{ Policy string } `json:"deployment"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(r.must(http.StatusOK, http.MethodGet, registrationPath, nil), &reg); err != nil {
		t.Fatal(err)
	}
	if reg.Spec.Deployment.Policy != "OnDemand" {
		t.Fatalf("the generated registration's policy is %q, want OnDemand", reg.Spec.Deployment.Policy)
	}

	// The agent's controllers run once its seed care reports SeedSystemComponentsHealthy (no extension yet).
	deadline := time.Now().Add(60 * time.Second)
	for !seedCondition(r, seed, "SeedSystemComponentsHealthy", "True") {
		if time.Now().After(deadline) {
			t.Fatal("the seed's SeedSystemComponentsHealthy did not turn True")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// OnDemand without a shoot: no installation.
	time.Sleep(3 * time.Second)
	if cis := r.installations(seed); len(cis) != 0 {
		t.Fatalf("installations without a shoot: %v", cis)
	}

	// A shoot needs provider-local: the hub makes the installation, the agent installs the chart.
	r.must(http.StatusCreated, http.MethodPost, "/apis/core.gardener.cloud/v1beta1/namespaces/garden-local/shoots", shoot)
	ci, took := r.waitInstallation(seed, "the installation to be made and installed", 60*time.Second, func(ci *installationStatus) bool {
		return ci.has("Valid=True/RegistrationValid", "Installed=True/InstallationSuccessful")
	})
	t.Logf("e2e: shoot created → installation valid and installed in %v", took.Round(time.Millisecond))
	ns := "extension-" + ci.Metadata.Name
	if err := l.StartProviderLocalIn(ctx, seed, ns); err != nil {
		t.Fatal(err)
	}
	if _, took := r.waitShoot("the shoot to be created", 90*time.Second, succeededAt(0)); true {
		t.Logf("e2e: provider-local started → shoot Succeeded in %v", took.Round(time.Millisecond))
	}
	ci, _ = r.waitInstallation(seed, "every condition of a running extension", 30*time.Second, func(ci *installationStatus) bool {
		return ci.has("Valid=True/RegistrationValid", "Installed=True/InstallationSuccessful", "Healthy=True/ControllerHealthy",
			"Progressing=False/ControllerRolledOut", "Required=True/ExtensionObjectsExist")
	})
	if !slices.Contains(ci.Metadata.Finalizers, "core.gardener.cloud/controllerinstallation") {
		t.Errorf("installation finalizers %v", ci.Metadata.Finalizers)
	}
	namespace, err := s.Client.CoreV1().Namespaces().Get(ctx, ns, kmetav1.GetOptions{})
	if err != nil || namespace.Labels["gardener.cloud/role"] != "extension" || namespace.Labels["controllerregistration.core.gardener.cloud/name"] != "provider-local" {
		t.Fatalf("namespace %s: %v %v", ns, err, namespace.GetLabels())
	}

	// The Helm release carries the injected values.
	rel := helmRelease(t, s, ns)
	if rel == nil || rel.Info.Status != release.StatusDeployed {
		t.Fatalf("release provider-local in %s: %v", ns, rel)
	}
	for _, want := range []string{"name: SEED_NAME\n          value: \"edge\"", "name: SEED_PROVIDER\n          value: \"edge\"",
		"name: SEED_REGION\n          value: \"local\"", "gardener.cloud/version:", "replicas: 0", "--log-level=info"} {
		if !strings.Contains(rel.Manifest, want) {
			t.Errorf("release manifest lacks %q:\n%s", want, rel.Manifest)
		}
	}
	if gardener, ok := rel.Config["gardener"].(map[string]any); !ok || gardener["seed"].(map[string]any)["name"] != seed {
		t.Errorf("release values lack the injected gardener block: %v", rel.Config)
	}
	firstRevision := rel.Version

	// A values change upgrades the release.
	r.must(http.StatusOK, http.MethodPatch, deploymentPath, map[string]any{"helm": map[string]any{"values": map[string]any{"replicaCount": 0,
		"config": map[string]any{"logLevel": "debug"}}}})
	deadline = time.Now().Add(30 * time.Second)
	for rel = helmRelease(t, s, ns); rel.Version == firstRevision && time.Now().Before(deadline); rel = helmRelease(t, s, ns) {
		time.Sleep(100 * time.Millisecond)
	}
	if rel.Version <= firstRevision || !strings.Contains(rel.Manifest, "--log-level=debug") {
		t.Fatalf("after the values change: revision %d (was %d), manifest:\n%s", rel.Version, firstRevision, rel.Manifest)
	}
	t.Logf("e2e: values change → release revision %d", rel.Version)
	r.waitInstallation(seed, "the upgraded installation healthy", 30*time.Second, func(ci *installationStatus) bool {
		return ci.has("Valid=True", "Installed=True", "Healthy=True", "Progressing=False")
	})

	// The last shoot goes: its extension objects go, Required turns False and the installation goes with its release
	// and namespace.
	r.must(http.StatusOK, http.MethodPatch, e2eShootPath, map[string]any{"metadata": map[string]any{"annotations": map[string]any{"confirmation.gardener.cloud/deletion": "true"}}})
	if code, body := r.do(http.MethodDelete, e2eShootPath, nil); code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("delete shoot: %d %s", code, body)
	}
	took = r.waitGone("the shoot", e2eShootPath, 90*time.Second)
	t.Logf("e2e: shoot deleted in %v", took.Round(time.Millisecond))
	if err := l.StopProviderLocal(seed); err != nil {
		t.Fatal(err)
	}
	took = r.waitGone("the installation", "/apis/core.gardener.cloud/v1beta1/controllerinstallations/"+ci.Metadata.Name, 60*time.Second)
	t.Logf("e2e: shoot gone → installation gone in %v", took.Round(time.Millisecond))
	if rel := helmRelease(t, s, ns); rel != nil {
		t.Errorf("release after the installation went: revision %d", rel.Version)
	}
	if _, err := s.Client.CoreV1().Namespaces().Get(ctx, ns, kmetav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after the installation went: %v", ns, err)
	}

	// Always: an installation without shoots.
	r.must(http.StatusOK, http.MethodPatch, registrationPath, map[string]any{"spec": map[string]any{"deployment": map[string]any{"policy": "Always"}}})
	ci, took = r.waitInstallation(seed, "an installation with policy Always", 60*time.Second, func(ci *installationStatus) bool {
		return ci.has("Valid=True/RegistrationValid", "Installed=True/InstallationSuccessful", "Healthy=True", "Required=False/NoExtensionObjects")
	})
	t.Logf("e2e: policy Always → installation installed in %v", took.Round(time.Millisecond))
	alwaysNS := "extension-" + ci.Metadata.Name
	healthyRevision := helmRelease(t, s, alwaysNS).Version

	// A broken chart: Valid=False with Helm's message; the running release stays.
	r.must(http.StatusOK, http.MethodPatch, deploymentPath, map[string]any{"helm": map[string]any{"rawChart": brokenChart(t)}})
	ci, _ = r.waitInstallation(seed, "Valid=False for the broken chart", 30*time.Second, func(ci *installationStatus) bool {
		return ci.has("Valid=False/ChartCannotBeRendered")
	})
	if _, _, msg := ci.condition("Valid"); !strings.Contains(msg, "nosuchfunction") {
		t.Errorf("Valid message %q lacks the rendering error", msg)
	}
	if rel := helmRelease(t, s, alwaysNS); rel == nil || rel.Version != healthyRevision {
		t.Errorf("the broken chart changed the release: %v", rel)
	}

	// Deleting the deployment waits for the registration; deleting the registration waits for its installation,
	// which the agent uninstalls; then all three go.
	r.must(http.StatusOK, http.MethodDelete, deploymentPath, nil)
	r.must(http.StatusOK, http.MethodDelete, registrationPath, nil)
	var held struct {
		Metadata struct {
			DeletionTimestamp *time.Time `json:"deletionTimestamp"`
			Finalizers        []string   `json:"finalizers"`
		} `json:"metadata"`
	}
	if code, body := r.do(http.MethodGet, registrationPath, nil); code != http.StatusOK {
		t.Fatalf("the registration went while its installation exists: %d %s", code, body)
	} else if err := json.Unmarshal(body, &held); err != nil || held.Metadata.DeletionTimestamp == nil ||
		!slices.Contains(held.Metadata.Finalizers, "core.gardener.cloud/controllerregistration") {
		t.Fatalf("the registration being deleted: %s", body)
	}
	if code, _ := r.do(http.MethodGet, deploymentPath, nil); code != http.StatusOK {
		t.Fatal("the deployment went while a registration references it")
	}
	took = r.waitGone("the installation", "/apis/core.gardener.cloud/v1beta1/controllerinstallations/"+ci.Metadata.Name, 60*time.Second)
	r.waitGone("the registration", registrationPath, 30*time.Second)
	r.waitGone("the deployment", deploymentPath, 30*time.Second)
	t.Logf("e2e: registration deleted → installation, registration and deployment gone in %v", took.Round(time.Millisecond))
	if rel := helmRelease(t, s, alwaysNS); rel != nil {
		t.Errorf("release after the registration went: revision %d", rel.Version)
	}
}
