package helmrelease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestRender(t *testing.T) {
	m := newOfflineManager(t, Config{})

	manifest, err := m.Render(configMapChart(t, "0.1.0", nil), "ext", "extension-x", map[string]any{"greeting": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: ext\n", `greeting: "hello"`, "chart: ext-0.1.0"} {
		if !strings.Contains(manifest, want) {
			t.Errorf("manifest lacks %q:\n%s", want, manifest)
		}
	}

	// A parse error: Helm's message names the file and line.
	broken := configMapChart(t, "0.1.0", chartFiles{"templates/broken.yaml": "kind: ConfigMap\nmetadata:\n  name: {{ nope .Values }}\n"})
	_, err = m.Render(broken, "ext", "extension-x", nil)
	if err == nil || !strings.Contains(err.Error(), "templates/broken.yaml:3") || !strings.Contains(err.Error(), `function "nope" not defined`) {
		t.Errorf("Render(parse error) = %v, want Helm's parse error with file and line", err)
	}

	// An execution error.
	failing := configMapChart(t, "0.1.0", chartFiles{"templates/fail.yaml": "{{ required \"greeting2 is required\" .Values.greeting2 }}\n"})
	_, err = m.Render(failing, "ext", "extension-x", nil)
	if err == nil || !strings.Contains(err.Error(), "templates/fail.yaml:1") || !strings.Contains(err.Error(), "greeting2 is required") {
		t.Errorf("Render(execution error) = %v, want Helm's execution error with file and line", err)
	}

	// Not a chart.
	if _, err := m.Render([]byte("not a chart"), "ext", "extension-x", nil); err == nil || !strings.Contains(err.Error(), "loading chart archive") {
		t.Errorf("Render(garbage) = %v, want a load error", err)
	}
	// A library chart cannot be installed.
	lib := buildChart(t, "lib", chartFiles{"Chart.yaml": "apiVersion: v2\nname: lib\nversion: 1.0.0\ntype: library\n"})
	if _, err := m.Render(lib, "ext", "extension-x", nil); err == nil || !strings.Contains(err.Error(), "library chart") {
		t.Errorf("Render(library chart) = %v, want it refused", err)
	}
	// A declared dependency missing from charts/.
	dep := buildChart(t, "dep", chartFiles{"Chart.yaml": chartYAML("dep", "1.0.0") + "dependencies:\n- name: sub\n  version: 1.0.0\n"})
	if _, err := m.Render(dep, "ext", "extension-x", nil); err == nil || !strings.Contains(err.Error(), "sub") {
		t.Errorf("Render(missing dependency) = %v, want it named", err)
	}
}

// releaseSecrets returns the names of the release's record Secrets, sorted.
func releaseSecrets(t *testing.T, client kubernetes.Interface, namespace, name string) []string {
	t.Helper()
	list, err := client.CoreV1().Secrets(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}

func greetingOf(t *testing.T, client kubernetes.Interface, namespace, name string) string {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ConfigMap %s/%s: %v", namespace, name, err)
	}
	return cm.Data["greeting"]
}

// operations is the count of operationDuration's series of operation and outcome.
func operations(t *testing.T, operation, outcome string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := operationDuration.WithLabelValues(operation, outcome).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// TestApplyLifecycle runs a release through install, no-op applies, upgrades, uninstall and a reinstall, and checks
// what each step left in the seed and counted in the Helm operation metrics.
func TestApplyLifecycle(t *testing.T) {
	type series struct{ operation, outcome string }
	before := map[series]uint64{}
	for _, op := range []string{opInstall, opUpgrade, opUninstall, opNone} {
		for _, outcome := range []string{"success", "error"} {
			before[series{op, outcome}] = operations(t, op, outcome)
		}
	}
	m, s := newSeedManager(t, Config{MaxHistory: 3})
	ctx := testContext(t)
	ns := s.Namespace(t)
	v1 := configMapChart(t, "0.1.0", nil)

	// Install: revision 1 with the given values.
	rel, changed, err := m.Apply(ctx, v1, "ext", ns, map[string]any{"greeting": "hello", "replicas": 2})
	if err != nil {
		t.Fatal(err)
	}
	if !changed || rel.Version != 1 || rel.Info.Status != release.StatusDeployed || !strings.Contains(rel.Manifest, `greeting: "hello"`) {
		t.Fatalf("install: changed %v, revision %d, status %s, manifest:\n%s", changed, rel.Version, rel.Info.Status, rel.Manifest)
	}
	if got := greetingOf(t, s.Client, ns, "ext"); got != "hello" {
		t.Errorf("live greeting = %q, want hello", got)
	}
	if got := releaseSecrets(t, s.Client, ns, "ext"); !slices.Equal(got, []string{"sh.helm.release.v1.ext.v1"}) {
		t.Errorf("release secrets = %v", got)
	}

	// Unchanged: the same chart and the same values (an int given as a float this time) make no revision.
	rel, changed, err = m.Apply(ctx, v1, "ext", ns, map[string]any{"replicas": 2.0, "greeting": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if changed || rel.Version != 1 {
		t.Fatalf("unchanged apply: changed %v, revision %d; want no new revision", changed, rel.Version)
	}
	if got, err := m.Get(ctx, "ext", ns); err != nil || got == nil || got.Version != 1 {
		t.Fatalf("Get = %v, %v; want revision 1", got, err)
	}

	// Values change: revision 2.
	rel, changed, err = m.Apply(ctx, v1, "ext", ns, map[string]any{"greeting": "bye", "replicas": 2})
	if err != nil {
		t.Fatal(err)
	}
	if !changed || rel.Version != 2 || !strings.Contains(rel.Manifest, `greeting: "bye"`) {
		t.Fatalf("values change: changed %v, revision %d, manifest:\n%s", changed, rel.Version, rel.Manifest)
	}
	if got := greetingOf(t, s.Client, ns, "ext"); got != "bye" {
		t.Errorf("live greeting = %q, want bye", got)
	}

	// Removing a value is a change too (the stored values are not reused).
	rel, changed, err = m.Apply(ctx, v1, "ext", ns, map[string]any{"greeting": "bye"})
	if err != nil || !changed || rel.Version != 3 {
		t.Fatalf("value removed: %v, changed %v, revision %v", err, changed, rel)
	}

	// No values at all: the chart's defaults, not the last revision's values (Helm would reuse those).
	rel, changed, err = m.Apply(ctx, v1, "ext", ns, nil)
	if err != nil || !changed || rel.Version != 4 || greetingOf(t, s.Client, ns, "ext") != "default" {
		t.Fatalf("values emptied: %v, changed %v, revision %v, greeting %q", err, changed, rel, greetingOf(t, s.Client, ns, "ext"))
	}

	// Chart change with the same values: an upgrade to the new chart, with its new object.
	v2 := configMapChart(t, "0.2.0", chartFiles{"templates/second.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-second\n"})
	rel, changed, err = m.Apply(ctx, v2, "ext", ns, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if !changed || rel.Version != 5 || rel.Chart.Metadata.Version != "0.2.0" || rel.Labels[ChartDigestLabel] != chartDigestLabelValue(archiveDigest(v2)) {
		t.Fatalf("chart change: changed %v, revision %d, chart %s, labels %v", changed, rel.Version, rel.Chart.Metadata.Version, rel.Labels)
	}
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "ext-second", metav1.GetOptions{}); err != nil {
		t.Errorf("the new chart's ConfigMap: %v", err)
	}
	if _, changed, err := m.Apply(ctx, v2, "ext", ns, nil); err != nil || changed {
		t.Fatalf("unchanged apply of the new chart: changed %v, %v", changed, err)
	}
	// MaxHistory 3 keeps the last three revisions.
	if got := releaseSecrets(t, s.Client, ns, "ext"); !slices.Equal(got, []string{"sh.helm.release.v1.ext.v3", "sh.helm.release.v1.ext.v4", "sh.helm.release.v1.ext.v5"}) {
		t.Errorf("release secrets after 5 revisions with MaxHistory 3 = %v", got)
	}

	// Uninstall removes the objects and every record.
	if err := m.Uninstall(ctx, "ext", ns); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ext", "ext-second"} {
		if _, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s after Uninstall: %v, want NotFound", name, err)
		}
	}
	if got := releaseSecrets(t, s.Client, ns, "ext"); len(got) != 0 {
		t.Errorf("release secrets after Uninstall = %v", got)
	}
	if got, err := m.Get(ctx, "ext", ns); got != nil || err != nil {
		t.Errorf("Get after Uninstall = %v, %v; want nil, nil", got, err)
	}
	// Uninstalling what is not there is fine, also in a namespace that does not exist.
	if err := m.Uninstall(ctx, "ext", ns); err != nil {
		t.Errorf("second Uninstall: %v", err)
	}
	if err := m.Uninstall(ctx, "never", "no-such-namespace"); err != nil {
		t.Errorf("Uninstall of a release never installed: %v", err)
	}
	// And it can be installed again.
	if rel, changed, err := m.Apply(ctx, v1, "ext", ns, nil); err != nil || !changed || rel.Version != 1 || !strings.Contains(rel.Manifest, `greeting: "default"`) {
		t.Fatalf("reinstall: %v, changed %v, %v", err, changed, rel)
	}

	// Each Apply and Uninstall counted once, by what it did.
	for sr, want := range map[series]uint64{
		{opInstall, "success"}: 2, {opUpgrade, "success"}: 4, {opNone, "success"}: 2, {opUninstall, "success"}: 3,
		{opInstall, "error"}: 0, {opUpgrade, "error"}: 0, {opNone, "error"}: 0, {opUninstall, "error"}: 0,
	} {
		if got := operations(t, sr.operation, sr.outcome) - before[sr]; got != want {
			t.Errorf("trellis_agent_helm_operation_duration_seconds{operation=%q,outcome=%q} counted %d, want %d", sr.operation, sr.outcome, got, want)
		}
	}
}

func TestApplyTemplateError(t *testing.T) {
	m, s := newSeedManager(t, Config{})
	ctx := testContext(t)
	ns := s.Namespace(t)
	broken := configMapChart(t, "0.1.0", chartFiles{"templates/broken.yaml": "{{ .Values.greeting | nope }}\n"})
	_, _, err := m.Apply(ctx, broken, "ext", ns, nil)
	if err == nil || !strings.Contains(err.Error(), "templates/broken.yaml:1") {
		t.Fatalf("Apply(broken chart) = %v, want Helm's template error", err)
	}
	// Nothing was recorded: rendering fails before Helm records a revision.
	if got := releaseSecrets(t, s.Client, ns, "ext"); len(got) != 0 {
		t.Errorf("release secrets = %v", got)
	}
}

// statusOf returns the status of each revision of the release, in revision order.
func statusOf(t *testing.T, store *storage.Storage, name string) []string {
	t.Helper()
	h, err := store.History(name)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatal(err)
	}
	slices.SortFunc(h, func(a, b *release.Release) int { return a.Version - b.Version })
	var out []string
	for _, r := range h {
		out = append(out, fmt.Sprintf("v%d:%s", r.Version, r.Info.Status))
	}
	return out
}

func helmStorage(client kubernetes.Interface, namespace string) *storage.Storage {
	return storage.Init(driver.NewSecrets(client.CoreV1().Secrets(namespace)))
}

// A release whose install failed in the seed (the API server refused an object) is upgraded once the chart or values
// are fixed.
func TestApplyRecoversFailedInstall(t *testing.T) {
	m, s := newSeedManager(t, Config{})
	ctx := testContext(t)
	ns := s.Namespace(t)
	store := helmStorage(s.Client, ns)
	ch := configMapChart(t, "0.1.0", chartFiles{"templates/named.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}\n"})

	_, changed, err := m.Apply(ctx, ch, "ext", ns, map[string]any{"name": "Not_A_Valid_Name"})
	if err == nil || !strings.Contains(err.Error(), "Not_A_Valid_Name") || changed {
		t.Fatalf("Apply(invalid object) = changed %v, %v; want the API server's refusal", changed, err)
	}
	if got := statusOf(t, store, "ext"); !slices.Equal(got, []string{"v1:failed"}) {
		t.Fatalf("history after failed install = %v", got)
	}
	if got, err := m.Get(ctx, "ext", ns); got != nil || err != nil {
		t.Errorf("Get with only a failed revision = %v, %v; want nil, nil", got, err)
	}
	// Retrying the same failure is an upgrade that fails again, not "cannot re-use a name that is still in use".
	// The fixed upgrade then supersedes the last failed revision, as Helm does.
	if _, _, err := m.Apply(ctx, ch, "ext", ns, map[string]any{"name": "Not_A_Valid_Name"}); err == nil || !strings.Contains(err.Error(), "Not_A_Valid_Name") {
		t.Fatalf("retry = %v, want the same refusal", err)
	}

	rel, changed, err := m.Apply(ctx, ch, "ext", ns, map[string]any{"name": "valid-name"})
	if err != nil {
		t.Fatal(err)
	}
	if !changed || rel.Info.Status != release.StatusDeployed || rel.Version != 3 {
		t.Fatalf("fixed: changed %v, revision %d, status %s", changed, rel.Version, rel.Info.Status)
	}
	if got := statusOf(t, store, "ext"); !slices.Equal(got, []string{"v1:failed", "v2:superseded", "v3:deployed"}) {
		t.Errorf("history = %v", got)
	}
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "valid-name", metav1.GetOptions{}); err != nil {
		t.Errorf("fixed object: %v", err)
	}
	if greetingOf(t, s.Client, ns, "ext") != "default" {
		t.Error("the chart's other object is not deployed")
	}
}

// A revision left pending by an operation that never finished (the agent died) does not block the release forever.
func TestApplyRecoversInterruptedOperations(t *testing.T) {
	m, s := newSeedManager(t, Config{})
	ctx := testContext(t)
	ns := s.Namespace(t)
	store := helmStorage(s.Client, ns)
	ch := configMapChart(t, "0.1.0", nil)

	// pending-upgrade: revision 2 was recorded by an upgrade that then died.
	rel, _, err := m.Apply(ctx, ch, "up", ns, map[string]any{"greeting": "one"})
	if err != nil {
		t.Fatal(err)
	}
	pending := *rel
	pending.Info = &release.Info{FirstDeployed: rel.Info.FirstDeployed, LastDeployed: rel.Info.LastDeployed, Status: release.StatusPendingUpgrade}
	pending.Version = 2
	if err := store.Create(&pending); err != nil {
		t.Fatal(err)
	}
	rel, changed, err := m.Apply(ctx, ch, "up", ns, map[string]any{"greeting": "two"})
	if err != nil {
		t.Fatalf("Apply over a pending upgrade: %v", err)
	}
	if !changed || rel.Version != 3 || greetingOf(t, s.Client, ns, "up") != "two" {
		t.Fatalf("Apply over a pending upgrade: changed %v, revision %d", changed, rel.Version)
	}
	if got := statusOf(t, store, "up"); !slices.Equal(got, []string{"v1:superseded", "v2:failed", "v3:deployed"}) {
		t.Errorf("history = %v", got)
	}

	// pending-install: the first revision never finished; with the same chart and values, Apply still deploys.
	rel, _, err = m.Apply(ctx, ch, "inst", ns, map[string]any{"greeting": "one"})
	if err != nil {
		t.Fatal(err)
	}
	rel.SetStatus(release.StatusPendingInstall, "Initial install underway")
	if err := store.Update(rel); err != nil {
		t.Fatal(err)
	}
	rel, changed, err = m.Apply(ctx, ch, "inst", ns, map[string]any{"greeting": "one"})
	if err != nil {
		t.Fatalf("Apply over a pending install: %v", err)
	}
	if !changed || rel.Version != 2 || rel.Info.Status != release.StatusDeployed {
		t.Fatalf("Apply over a pending install: changed %v, revision %d, status %s", changed, rel.Version, rel.Info.Status)
	}
	// Helm supersedes the revision it upgraded from, here the one marked failed.
	if got := statusOf(t, store, "inst"); !slices.Equal(got, []string{"v1:superseded", "v2:deployed"}) {
		t.Errorf("history = %v", got)
	}

	// uninstalling: an uninstall died half-way; Apply finishes it and installs afresh.
	rel.SetStatus(release.StatusUninstalling, "Deletion in progress (or silently failed)")
	if err := store.Update(rel); err != nil {
		t.Fatal(err)
	}
	rel, changed, err = m.Apply(ctx, ch, "inst", ns, map[string]any{"greeting": "three"})
	if err != nil {
		t.Fatalf("Apply over an uninstalling release: %v", err)
	}
	if !changed || rel.Version != 1 || greetingOf(t, s.Client, ns, "inst") != "three" {
		t.Fatalf("Apply over an uninstalling release: changed %v, revision %d", changed, rel.Version)
	}
	if got := statusOf(t, store, "inst"); !slices.Equal(got, []string{"v1:deployed"}) {
		t.Errorf("history = %v", got)
	}
}

// Apply is bounded by its context: cut off anywhere, it returns, and the next Apply converges.
func TestApplyCancelled(t *testing.T) {
	m, s := newSeedManager(t, Config{})
	ctx := testContext(t)
	ns := s.Namespace(t)
	ch := configMapChart(t, "0.1.0", nil)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	start := time.Now()
	if _, _, err := m.Apply(cancelled, ch, "ext", ns, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply(cancelled context) = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Apply(cancelled context) took %v", d)
	}

	// Cut off after various delays, then retried: every round ends deployed with its values.
	for i, d := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond} {
		greeting := fmt.Sprintf("round-%d", i)
		short, cancel := context.WithTimeout(ctx, d)
		start := time.Now()
		_, _, err := m.Apply(short, ch, "ext", ns, map[string]any{"greeting": greeting})
		took := time.Since(start)
		cancel()
		t.Logf("cut off after %v: returned after %v: %v", d, took.Round(time.Millisecond), err)
		if took > d+10*time.Second {
			t.Errorf("Apply cut off after %v returned after %v", d, took)
		}
		rel, _, err := m.Apply(ctx, ch, "ext", ns, map[string]any{"greeting": greeting})
		if err != nil {
			t.Fatalf("round %d: Apply after the cut: %v", i, err)
		}
		if rel.Info.Status != release.StatusDeployed || greetingOf(t, s.Client, ns, "ext") != greeting {
			t.Fatalf("round %d: status %s, greeting %q", i, rel.Info.Status, greetingOf(t, s.Client, ns, "ext"))
		}
	}
}

// Operations on one release are serialised: concurrent Applies of different values each make their own revision
// instead of failing on Helm's "another operation is in progress".
func TestApplyConcurrent(t *testing.T) {
	m, s := newSeedManager(t, Config{})
	ctx := testContext(t)
	ns := s.Namespace(t)
	ch := configMapChart(t, "0.1.0", nil)
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			_, _, err := m.Apply(ctx, ch, "ext", ns, map[string]any{"greeting": fmt.Sprint(i)})
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	rel, err := m.Get(ctx, "ext", ns)
	if err != nil || rel == nil || rel.Version != 4 {
		t.Fatalf("Get = %v, %v; want revision 4", rel, err)
	}
}
