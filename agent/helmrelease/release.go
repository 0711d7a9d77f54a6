package helmrelease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	helmtime "helm.sh/helm/v3/pkg/time"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ChartDigestLabel is the release label that records the sha256 of the chart archive a revision was made from
// (its hex digits, cut to the 63 characters a label value may have). Apply compares it to decide "unchanged": a
// release keeps only the loaded chart, which cannot tell two archives apart reliably (subcharts are not stored).
const ChartDigestLabel = "helmrelease.trellis.dev/chart-digest"

// Render renders the chart in archive client-side (Helm's default capabilities, no access to the seed) as release
// name in namespace with values, and returns the manifest (without hooks and CRDs). Its error carries Helm's message,
// such as a template's parse or execution error with file and line, for reporting (Gardener's
// ChartCannotBeRendered).
func (m *Manager) Render(archive []byte, name, namespace string, values map[string]any) (manifest string, err error) {
	ch, _, err := loadChart(archive)
	if err != nil {
		return "", err
	}
	vals, err := normalizeValues(values)
	if err != nil {
		return "", err
	}
	opts := chartutil.ReleaseOptions{Name: name, Namespace: namespace, Revision: 1, IsInstall: true}
	r, err := render(ch, vals, opts, chartutil.DefaultCapabilities.Copy(), nil)
	if err != nil {
		return "", fmt.Errorf("rendering chart %s as release %s/%s: %w", chartName(ch), namespace, name, err)
	}
	return r.manifest, nil
}

// Apply installs the chart in archive as release name in namespace with values, or upgrades the release to it. It
// returns the deployed release and whether a new revision was made: when the deployed revision already has the same
// chart (by the archive's digest, see ChartDigestLabel) and the same values (compared in JSON normal form), it does
// nothing and returns that revision with changed false.
//
// The namespace must exist. values are complete: an upgrade never reuses the values of earlier revisions. Hooks are
// not run and readiness is not awaited (see Health). A last revision that failed is upgraded; one left
// pending-install, pending-upgrade or pending-rollback by an interrupted operation is marked failed first; one left
// uninstalling is uninstalled and installed again; so calling Apply again after any failure converges.
//
// On error, rel is nil and changed false; a failed revision Helm recorded stays in the seed for the next Apply.
// The work is bounded by ctx and Config.OperationTimeout.
func (m *Manager) Apply(ctx context.Context, archive []byte, name, namespace string, values map[string]any) (rel *release.Release, changed bool, err error) {
	operation := opNone
	defer func(begin time.Time) { observe(operation, begin, err) }(time.Now())
	ch, digest, err := loadChart(archive)
	if err != nil {
		return nil, false, err
	}
	vals, err := normalizeValues(values)
	if err != nil {
		return nil, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.OperationTimeout)
	defer cancel()
	unlock, err := m.locks.lock(ctx, namespace, name)
	if err != nil {
		return nil, false, fmt.Errorf("applying release %s/%s: waiting for another operation on it: %w", namespace, name, err)
	}
	defer unlock()
	op, err := m.newOperation(ctx, name, namespace)
	if err != nil {
		return nil, false, err
	}

	history, err := op.records.history(context.WithoutCancel(ctx), name)
	switch {
	case errors.Is(err, errNoRelease):
		operation = opInstall
		return op.install(ctx, ch, digest, vals, m.cfg)
	case err != nil:
		return nil, false, fmt.Errorf("reading release %s/%s: %w", namespace, name, err)
	}

	last := history[len(history)-1]
	switch status := last.Info.Status; {
	case status == release.StatusDeployed:
		same, err := sameValues(last.Config, vals)
		if err != nil {
			return nil, false, fmt.Errorf("comparing values of release %s/%s: %w", namespace, name, err)
		}
		if same && last.Labels[ChartDigestLabel] == chartDigestLabelValue(digest) {
			return last, false, nil
		}
	case status.IsPending() || status == release.StatusUnknown:
		// Only this Manager writes the release and it holds the release's lock, so a pending revision is the
		// remainder of an operation that can no longer finish. Marking it failed lets the upgrade below proceed from
		// it (or from the last deployed revision, if there is one), as Helm would not over a pending one.
		op.log.Warn("recovering release left by an interrupted operation", "revision", last.Version, "status", status)
		last.SetStatus(release.StatusFailed, fmt.Sprintf("Interrupted while %s; marked failed by trellis-agent to recover", status))
		if err := op.records.update(context.WithoutCancel(ctx), last); err != nil {
			return nil, false, fmt.Errorf("recovering release %s/%s from %s: %w", namespace, name, status, err)
		}
	case status == release.StatusUninstalling || status == release.StatusUninstalled:
		op.log.Warn("finishing the uninstallation of release before installing it again", "revision", last.Version, "status", status)
		operation = opInstall
		if err := op.uninstall(ctx, history); err != nil {
			return nil, false, err
		}
		return op.install(ctx, ch, digest, vals, m.cfg)
	}
	operation = opUpgrade
	return op.upgrade(ctx, history, ch, digest, vals, m.cfg)
}

// newRelease is revision version of the release, rendered, pending.
func (op *operation) newRelease(ch *chart.Chart, digest string, vals map[string]any, version int, r rendered, status release.Status, description string) *release.Release {
	now := helmtime.Now()
	rel := &release.Release{
		Name:      op.name,
		Namespace: op.namespace,
		Chart:     ch,
		Config:    vals,
		Manifest:  r.manifest,
		Hooks:     r.hooks,
		Version:   version,
		Labels:    map[string]string{ChartDigestLabel: chartDigestLabelValue(digest)},
		Info:      &release.Info{FirstDeployed: now, LastDeployed: now, Notes: r.notes},
	}
	rel.SetStatus(status, description)
	return rel
}

// prepare renders ch for revision version (install or upgrade) with the seed's capabilities and maps its objects.
func (op *operation) prepare(ch *chart.Chart, vals map[string]any, version int) (rendered, []object, error) {
	caps, err := capabilities(op.discovery)
	if err != nil {
		return rendered{}, nil, err
	}
	opts := chartutil.ReleaseOptions{Name: op.name, Namespace: op.namespace, Revision: version, IsInstall: version == 1, IsUpgrade: version > 1}
	r, err := render(ch, vals, opts, caps, op.seed)
	if err != nil {
		return rendered{}, nil, err
	}
	docs, err := parseDocuments(r.manifests)
	if err != nil {
		return rendered{}, nil, fmt.Errorf("unable to build kubernetes objects from release manifest: %w", err)
	}
	objs, err := op.objects(docs)
	if err != nil {
		return rendered{}, nil, err
	}
	return r, objs, nil
}

// install makes revision 1: the chart's CRDs, the record (pending-install), the objects, the record deployed.
func (op *operation) install(ctx context.Context, ch *chart.Chart, digest string, vals map[string]any, cfg Config) (*release.Release, bool, error) {
	fail := func(err error) (*release.Release, bool, error) {
		return nil, false, fmt.Errorf("installing release %s/%s (chart %s): %w", op.namespace, op.name, chartName(ch), err)
	}
	if crds := ch.CRDObjects(); len(crds) > 0 {
		if err := op.installCRDs(ctx, crds); err != nil {
			return fail(err)
		}
	}
	r, objs, err := op.prepare(ch, vals, 1)
	if err != nil {
		return fail(err)
	}
	rel := op.newRelease(ch, digest, vals, 1, r, release.StatusPendingInstall, "Initial install underway")
	// The ownership check runs before anything is recorded: a conflict leaves no revision behind, as with Helm.
	if err := op.checkOwnership(ctx, objs, nil); err != nil {
		return fail(err)
	}
	if err := op.records.create(context.WithoutCancel(ctx), rel); err != nil {
		return fail(err)
	}
	if err := op.deploy(ctx, objs); err != nil {
		return fail(op.failed(ctx, rel, fmt.Sprintf("Release %q failed", op.name), err))
	}
	rel.SetStatus(release.StatusDeployed, "Install complete")
	if err := op.records.update(context.WithoutCancel(ctx), rel); err != nil {
		return fail(err)
	}
	op.log.Info("installed release", "chart", chartName(ch), "revision", rel.Version)
	return rel, true, nil
}

// upgrade makes the next revision from the one it replaces (the deployed one, else the last), removes the objects the
// new one no longer has, supersedes the replaced one and keeps cfg.MaxHistory revisions.
func (op *operation) upgrade(ctx context.Context, history []*release.Release, ch *chart.Chart, digest string, vals map[string]any, cfg Config) (*release.Release, bool, error) {
	fail := func(err error) (*release.Release, bool, error) {
		return nil, false, fmt.Errorf("upgrading release %s/%s (chart %s): %w", op.namespace, op.name, chartName(ch), err)
	}
	last := history[len(history)-1]
	current := deployed(history)
	if current == nil {
		current = last
	}
	r, objs, err := op.prepare(ch, vals, last.Version+1)
	if err != nil {
		return fail(err)
	}
	old, err := op.revisionObjects(current)
	if err != nil {
		return fail(err)
	}
	known := map[string]bool{}
	for _, o := range old {
		known[o.key()] = true
	}
	if err := op.checkOwnership(ctx, objs, known); err != nil {
		return fail(err)
	}

	rel := op.newRelease(ch, digest, vals, last.Version+1, r, release.StatusPendingUpgrade, "Preparing upgrade")
	rel.Info.FirstDeployed = current.Info.FirstDeployed
	if cfg.MaxHistory > 0 {
		if err := op.records.prune(context.WithoutCancel(ctx), history, cfg.MaxHistory-1); err != nil {
			return fail(err)
		}
	}
	if err := op.records.create(context.WithoutCancel(ctx), rel); err != nil {
		return fail(err)
	}
	if err := op.deploy(ctx, objs); err != nil {
		return fail(op.failed(ctx, rel, fmt.Sprintf("Upgrade %q failed", op.name), err))
	}
	var dropped []object
	for _, o := range old {
		if !slices.ContainsFunc(objs, func(n object) bool { return n.key() == o.key() }) {
			dropped = append(dropped, o)
		}
	}
	if err := op.remove(ctx, dropped, true); err != nil {
		return fail(op.failed(ctx, rel, fmt.Sprintf("Upgrade %q failed", op.name), err))
	}
	current.SetStatus(release.StatusSuperseded, "Superseded")
	if err := op.records.update(context.WithoutCancel(ctx), current); err != nil {
		return fail(err)
	}
	rel.SetStatus(release.StatusDeployed, "Upgrade complete")
	if err := op.records.update(context.WithoutCancel(ctx), rel); err != nil {
		return fail(err)
	}
	op.log.Info("upgraded release", "chart", chartName(ch), "revision", rel.Version)
	return rel, true, nil
}

// revisionObjects are the objects of a recorded revision, in Helm's uninstall order. Objects of kinds the seed no
// longer serves (their CRD was deleted, and with it every object of it) are left out.
func (op *operation) revisionObjects(rel *release.Release) ([]object, error) {
	manifests, err := sortedManifest(rel.Manifest, releaseutil.UninstallOrder)
	if err != nil {
		return nil, fmt.Errorf("reading the manifest of revision %d: %w", rel.Version, err)
	}
	docs, err := parseDocuments(manifests)
	if err != nil {
		return nil, fmt.Errorf("reading the manifest of revision %d: %w", rel.Version, err)
	}
	var objs []object
	for _, d := range docs {
		o, err := op.objects([]*unstructured.Unstructured{d})
		if err != nil {
			op.log.Warn("leaving out an object of a kind the seed does not serve", "revision", rel.Version, "err", err)
			continue
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

// failed records rel as failed with cause and returns cause.
func (op *operation) failed(ctx context.Context, rel *release.Release, what string, cause error) error {
	rel.SetStatus(release.StatusFailed, fmt.Sprintf("%s: %s", what, cause))
	if err := op.records.update(context.WithoutCancel(ctx), rel); err != nil {
		op.log.Error("recording a failed revision", "revision", rel.Version, "err", err)
	}
	return cause
}

// Get returns the deployed revision of release name in namespace, or nil when there is none (never installed,
// uninstalled, or only failed revisions).
func (m *Manager) Get(ctx context.Context, name, namespace string) (*release.Release, error) {
	history, err := m.History(ctx, name, namespace)
	if err != nil || history == nil {
		return nil, err
	}
	return deployed(history), nil
}

// History returns every revision of release name in namespace that is recorded, oldest first, or nil when there is
// none. A caller that rolls a release back reads the values of an earlier revision from it.
func (m *Manager) History(ctx context.Context, name, namespace string) ([]*release.Release, error) {
	history, err := m.records(namespace).history(ctx, name)
	switch {
	case errors.Is(err, errNoRelease):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading release %s/%s: %w", namespace, name, err)
	}
	return history, nil
}

// Uninstall removes release name in namespace: the objects it deployed (except those Helm is told to keep with
// helm.sh/resource-policy: keep) and all its revisions. A release that does not exist is not an error. The work is
// bounded by ctx and Config.OperationTimeout; objects are deleted in the background (their dependents go with the
// garbage collector), not awaited.
func (m *Manager) Uninstall(ctx context.Context, name, namespace string) (err error) {
	defer func(begin time.Time) { observe(opUninstall, begin, err) }(time.Now())
	ctx, cancel := context.WithTimeout(ctx, m.cfg.OperationTimeout)
	defer cancel()
	unlock, err := m.locks.lock(ctx, namespace, name)
	if err != nil {
		return fmt.Errorf("uninstalling release %s/%s: waiting for another operation on it: %w", namespace, name, err)
	}
	defer unlock()
	op, err := m.newOperation(ctx, name, namespace)
	if err != nil {
		return err
	}
	history, err := op.records.history(context.WithoutCancel(ctx), name)
	if errors.Is(err, errNoRelease) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading release %s/%s: %w", namespace, name, err)
	}
	return op.uninstall(ctx, history)
}

// uninstall marks the last revision uninstalling, deletes the objects of the deployed revision (else the last) in
// Helm's uninstall order, and then every record.
func (op *operation) uninstall(ctx context.Context, history []*release.Release) error {
	fail := func(err error) error {
		return fmt.Errorf("uninstalling release %s/%s: %w", op.namespace, op.name, err)
	}
	last := history[len(history)-1]
	rel := deployed(history)
	if rel == nil {
		rel = last
	}
	if last.Info.Status != release.StatusUninstalling {
		last.SetStatus(release.StatusUninstalling, "Deletion in progress (or silently failed)")
		if err := op.records.update(context.WithoutCancel(ctx), last); err != nil {
			return fail(err)
		}
	}
	objs, err := op.revisionObjects(rel)
	if err != nil {
		return fail(err)
	}
	if err := op.remove(ctx, objs, false); err != nil {
		return fail(fmt.Errorf("failed to delete release: %w", err))
	}
	for _, r := range history {
		if err := op.records.delete(context.WithoutCancel(ctx), r.Name, r.Version); err != nil {
			return fail(err)
		}
	}
	op.log.Info("uninstalled release")
	return nil
}

// loadChart loads a chart archive and checks that it can be installed.
func loadChart(archive []byte) (*chart.Chart, string, error) {
	if len(archive) == 0 {
		return nil, "", errors.New("loading chart: empty archive")
	}
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return nil, "", fmt.Errorf("loading chart archive: %w", err)
	}
	if ch.Metadata.Type == "library" {
		return nil, "", fmt.Errorf("chart %s is a library chart and cannot be installed", chartName(ch))
	}
	var missing []string
	for _, dep := range ch.Metadata.Dependencies {
		if !slices.ContainsFunc(ch.Dependencies(), func(sub *chart.Chart) bool { return sub.Name() == dep.Name }) {
			missing = append(missing, dep.Name)
		}
	}
	if len(missing) > 0 {
		return nil, "", fmt.Errorf("chart %s: found in Chart.yaml, but missing in charts/ directory: %s", chartName(ch), strings.Join(missing, ", "))
	}
	return ch, archiveDigest(archive), nil
}

func chartName(ch *chart.Chart) string {
	return ch.Metadata.Name + "-" + ch.Metadata.Version
}

// chartDigestLabelValue is the value of ChartDigestLabel for an archive digest ("sha256:<hex>").
func chartDigestLabelValue(digest string) string {
	_, hex, _ := strings.Cut(digest, ":")
	return hex[:min(len(hex), 63)]
}

// normalizeValues returns values in JSON normal form (a deep copy; numbers float64, as Helm has them after reading
// a release back, and as Gardener has a ControllerDeployment's values); nil gives an empty map.
func normalizeValues(values map[string]any) (map[string]any, error) {
	out := map[string]any{}
	if len(values) == 0 {
		return out, nil
	}
	data, err := json.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("values are not JSON: %w", err)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("values are not JSON: %w", err)
	}
	return out, nil
}

// sameValues tells whether a release's values and normalised values are equal in JSON normal form.
func sameValues(stored, vals map[string]any) (bool, error) {
	s, err := normalizeValues(stored)
	if err != nil {
		return false, err
	}
	return reflect.DeepEqual(s, vals), nil
}
