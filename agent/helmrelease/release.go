package helmrelease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
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
	hl := &helmLog{log: m.log.With("release", name, "namespace", namespace)}
	install := action.NewInstall(&action.Configuration{Log: hl.printf})
	install.ClientOnly = true
	install.DryRun = true
	install.DisableHooks = true
	install.ReleaseName = name
	install.Namespace = namespace
	rel, err := install.Run(ch, vals)
	if err != nil {
		return "", fmt.Errorf("rendering chart %s as release %s/%s: %w", chartName(ch), namespace, name, err)
	}
	return rel.Manifest, nil
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

	last, err := op.cfg.Releases.Last(name)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		operation = opInstall
		return op.install(ch, digest, vals, m.cfg)
	case err != nil:
		return nil, false, fmt.Errorf("reading release %s/%s: %w", namespace, name, err)
	}

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
		// remainder of an operation that can no longer finish. Helm refuses to upgrade over it; marking it failed
		// lets the upgrade below proceed from it (or from the last deployed revision, if there is one).
		op.log.Warn("recovering release left by an interrupted operation", "revision", last.Version, "status", status)
		last.SetStatus(release.StatusFailed, fmt.Sprintf("Interrupted while %s; marked failed by trellis-agent to recover", status))
		if err := op.cfg.Releases.Update(last); err != nil {
			return nil, false, fmt.Errorf("recovering release %s/%s from %s: %w", namespace, name, status, err)
		}
	case status == release.StatusUninstalling || status == release.StatusUninstalled:
		op.log.Warn("finishing the uninstallation of release before installing it again", "revision", last.Version, "status", status)
		operation = opInstall
		if err := op.uninstall(m.cfg); err != nil {
			return nil, false, err
		}
		return op.install(ch, digest, vals, m.cfg)
	}
	operation = opUpgrade
	return op.upgrade(ch, digest, vals, m.cfg)
}

func (op *operation) install(ch *chart.Chart, digest string, vals map[string]any, cfg Config) (*release.Release, bool, error) {
	install := action.NewInstall(op.cfg)
	install.ReleaseName = op.name
	install.Namespace = op.namespace
	install.DisableHooks = true
	install.Timeout = cfg.OperationTimeout
	install.Labels = map[string]string{ChartDigestLabel: chartDigestLabelValue(digest)}
	rel, err := install.Run(ch, vals)
	if err != nil {
		return nil, false, fmt.Errorf("installing release %s/%s (chart %s): %w", op.namespace, op.name, chartName(ch), err)
	}
	op.log.Info("installed release", "chart", chartName(ch), "revision", rel.Version)
	return rel, true, nil
}

func (op *operation) upgrade(ch *chart.Chart, digest string, vals map[string]any, cfg Config) (*release.Release, bool, error) {
	upgrade := action.NewUpgrade(op.cfg)
	upgrade.Namespace = op.namespace
	upgrade.DisableHooks = true
	upgrade.ResetValues = true // values are complete; Helm would otherwise reuse the last ones when they are empty
	upgrade.MaxHistory = cfg.MaxHistory
	upgrade.Timeout = cfg.OperationTimeout
	upgrade.Labels = map[string]string{ChartDigestLabel: chartDigestLabelValue(digest)}
	rel, err := upgrade.Run(op.name, ch, vals)
	if err != nil {
		return nil, false, fmt.Errorf("upgrading release %s/%s (chart %s): %w", op.namespace, op.name, chartName(ch), err)
	}
	op.log.Info("upgraded release", "chart", chartName(ch), "revision", rel.Version)
	return rel, true, nil
}

// Get returns the deployed revision of release name in namespace, or nil when there is none (never installed,
// uninstalled, or only failed revisions).
func (m *Manager) Get(ctx context.Context, name, namespace string) (*release.Release, error) {
	hl := &helmLog{log: m.log.With("release", name, "namespace", namespace)}
	core, err := m.coreClient(ctx)
	if err != nil {
		return nil, err
	}
	rel, err := m.storage(core, namespace, hl).Deployed(name)
	switch {
	case errors.Is(err, driver.ErrNoDeployedReleases), errors.Is(err, driver.ErrReleaseNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading release %s/%s: %w", namespace, name, err)
	}
	return rel, nil
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
	// Helm's IgnoreNotFound would also ignore every other error reading the history.
	if _, err := op.cfg.Releases.History(name); errors.Is(err, driver.ErrReleaseNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading release %s/%s: %w", namespace, name, err)
	}
	return op.uninstall(m.cfg)
}

func (op *operation) uninstall(cfg Config) error {
	uninstall := action.NewUninstall(op.cfg)
	uninstall.DisableHooks = true
	uninstall.Timeout = cfg.OperationTimeout
	if _, err := uninstall.Run(op.name); err != nil {
		// Helm logs why deleting the objects failed and returns only that it did.
		if cause := op.helmLog.failure(); cause != "" && !strings.Contains(err.Error(), cause) {
			err = fmt.Errorf("%w (%s)", err, cause)
		}
		return fmt.Errorf("uninstalling release %s/%s: %w", op.namespace, op.name, err)
	}
	op.log.Info("uninstalled release")
	return nil
}

// coreClient returns a core client whose requests are bound to ctx.
func (m *Manager) coreClient(ctx context.Context) (corev1client.CoreV1Interface, error) {
	c, err := corev1client.NewForConfig(bindConfig(ctx, m.rest))
	if err != nil {
		return nil, fmt.Errorf("helmrelease: seed client: %w", err)
	}
	return c, nil
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
	if err := action.CheckDependencies(ch, ch.Metadata.Dependencies); err != nil {
		return nil, "", fmt.Errorf("chart %s: %w", chartName(ch), err)
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
