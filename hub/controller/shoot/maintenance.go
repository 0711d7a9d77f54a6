package shoot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/hub/admission"
	"github.com/trellis-dev/trellis/hub/controller"
	"github.com/trellis-dev/trellis/hub/store"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Events of the maintenance controller, as Gardener names them.
const (
	EventKubernetesVersionMaintenance   = "KubernetesVersionMaintenance"
	EventMachineImageVersionMaintenance = "MachineImageVersionMaintenance"
	EventMaintenanceFailed              = "MaintenanceFailed"
)

// Defaults Gardener's API applies to CloudProfiles and Shoots, which the maintenance assumes where a field is empty.
const (
	defaultArchitecture = "amd64"
	defaultCRI          = "containerd"
)

// maintenanceDigest: the maintenance window, the maintain operation and the deletion. Gardener looks at a shoot when
// it appears, when its window changes and when it is annotated gardener.cloud/operation=maintain.
func maintenanceDigest(o store.Object) string {
	s := o.(*corev1beta1.Shoot)
	tw := s.GetSpec().GetMaintenance().GetTimeWindow()
	return fmt.Sprintf("%t|%s|%s-%s", hasMaintainOperation(s), effectiveTimeWindow(s), tw.GetBegin(), tw.GetEnd()) + deletionDigest(o)
}

func hasMaintainOperation(s *corev1beta1.Shoot) bool {
	return slices.Contains(operations(s.GetMetadata().GetAnnotations()[AnnotationOperation]), OperationMaintain)
}

// scheduled is the next maintenance of a shoot: a random moment of the next occurrence of its window.
type scheduled struct {
	window timeWindow
	at     time.Time
}

// maintenanceReconciler maintains shoots in their maintenance time windows.
type maintenanceReconciler struct {
	c        *collections
	cfg      MaintenanceConfig
	clock    clock.PassiveClock
	rand     func(int64) int64
	recorder *controller.Recorder
	log      *slog.Logger
	// validate checks the maintained shoot against the API's rules before it is written (Gardener's dry run).
	validate func(ctx context.Context, next, cur *corev1beta1.Shoot) error

	mu sync.Mutex
	// next holds, per shoot seen since the leader started, when it is maintained next. A shoot not in it (or whose
	// window changed) is maintained at once when inside its window, as Gardener does with the shoots it sees when it
	// starts and with shoots whose window changes; the schedule keeps other reconciliations (the shoot's own
	// changes) inside the window from maintaining it again.
	next map[controller.Key]scheduled
}

func newMaintenanceReconciler(c *collections, cfg MaintenanceConfig, clk clock.PassiveClock, rnd func(int64) int64, rec *controller.Recorder, log *slog.Logger) *maintenanceReconciler {
	r := &maintenanceReconciler{c: c, cfg: cfg, clock: clk, rand: rnd, recorder: rec, log: log, next: map[controller.Key]scheduled{}}
	r.validate = admissionValidate(c.source, cfg.Admission)
	return r
}

// admissionValidate validates an update of a shoot with the API's admission rules, reading references from src.
func admissionValidate(src controller.Collections, plugins admission.Plugins) func(ctx context.Context, next, cur *corev1beta1.Shoot) error {
	reader := admission.CollectionsReader{Source: src}
	return func(ctx context.Context, next, cur *corev1beta1.Shoot) error {
		p := plugins.For(next)
		next = proto.CloneOf(next)
		if p.Default != nil {
			p.Default(next)
		}
		if p.Validate != nil {
			if errs := p.Validate(ctx, reader, next, cur); len(errs) > 0 {
				return errs.ToAggregate()
			}
		}
		if p.Admit != nil {
			return p.Admit(ctx, reader, next, cur)
		}
		return nil
	}
}

func (r *maintenanceReconciler) schedule(k controller.Key) (scheduled, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.next[k]
	return s, ok
}

func (r *maintenanceReconciler) setSchedule(k controller.Key, s *scheduled) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s == nil {
		delete(r.next, k)
		return
	}
	r.next[k] = *s
}

// Reconcile maintains the shoot when it asks for it (gardener.cloud/operation=maintain) or when its maintenance is
// due inside its window, and looks again at its next maintenance. Outside its window a shoot is never changed.
func (r *maintenanceReconciler) Reconcile(ctx context.Context, k controller.Key) (controller.Result, error) {
	s, err := getShoot(ctx, r.c.shoots, k)
	if err != nil {
		return controller.Result{}, err
	}
	if s == nil || s.GetMetadata().GetDeletionTimestamp() != nil {
		r.setSchedule(k, nil)
		return controller.Result{}, nil
	}
	window := effectiveTimeWindow(s)
	now := r.clock.Now()
	sch, known := r.schedule(k)
	if known && sch.window != window {
		known = false
	}
	due := known && !now.Before(sch.at)
	if hasMaintainOperation(s) || (window.contains(now) && (!known || due)) {
		if err := r.maintain(ctx, s, now); err != nil {
			return controller.Result{}, err
		}
		known = false
	}
	if !known || due {
		sch = scheduled{window: window, at: now.Add(window.untilNext(now, r.rand))}
		r.setSchedule(k, &sch)
		r.log.Debug("scheduled the next maintenance", "shoot", k.String(), "at", sch.at.UTC().Format(time.RFC3339))
	}
	return controller.Result{RequeueAfter: max(sch.at.Sub(now), time.Second)}, nil
}

// updateResult is the outcome of one version maintenance, for lastMaintenance and the events.
type updateResult struct {
	description, reason string
	ok                  bool
}

// poolResult is the outcome for one worker pool.
type poolResult struct {
	pool string
	updateResult
}

func kubernetesResult(u *versionUpdate) *updateResult {
	if u == nil {
		return nil
	}
	if u.err != nil {
		return &updateResult{description: u.err.Error(), reason: u.reason}
	}
	return &updateResult{description: fmt.Sprintf("Updated Kubernetes version from %q to %q", u.from, u.to), reason: u.reason, ok: true}
}

// maintenance is what one maintenance of a shoot decided.
type maintenance struct {
	shoot        *corev1beta1.Shoot // the maintained copy
	controlPlane *updateResult
	poolVersions []poolResult
	poolImages   []poolResult
	operations   []string
}

func (m *maintenance) changed() bool {
	return len(m.operations) > 0 || m.controlPlane != nil || len(m.poolVersions) > 0 || len(m.poolImages) > 0
}

// maintain runs one maintenance of s: versions, then the operation annotation, then lastMaintenance, in Gardener's
// order (status first, so that a maintenance whose spec update fails is still reported).
func (r *maintenanceReconciler) maintain(ctx context.Context, s *corev1beta1.Shoot, now time.Time) error {
	k := key(s)
	log := r.log.With("shoot", k.String())
	log.Info("maintaining the shoot")
	profile, err := r.cloudProfile(ctx, s)
	if err != nil {
		return err
	}
	m, err := plan(s, profile, now, log)
	if err != nil {
		return err
	}
	cur := s
	if m.changed() {
		description, failure := maintenanceMessages(m)
		lm := &corev1beta1.LastMaintenance{Description: description, TriggeredTime: timestamppb.New(now), State: lastOperationStateProcessing}
		if failure != "" {
			lm.State, lm.FailureReason = lastOperationStateFailed, proto.String(failure)
		}
		if verr := r.validate(ctx, m.shoot, s); verr != nil {
			// The maintained spec would be refused: report it and try again in the next window. A maintain operation
			// goes, so that asking again after fixing the cause works.
			lm.Description, lm.State = "Maintenance failed", lastOperationStateFailed
			lm.FailureReason = proto.String("Updates to the Shoot failed to be applied: " + verr.Error())
			if _, err := r.writeLastMaintenance(ctx, s, lm); err != nil {
				return err
			}
			if hasMaintainOperation(s) {
				if _, err := updateShoot(ctx, r.c.shoots, k, false, func(cur *corev1beta1.Shoot) bool {
					return removeOperation(cur, OperationMaintain)
				}); err != nil {
					return err
				}
			}
			log.Info("shoot maintenance failed", "reason", verr)
			return nil
		}
		if cur, err = r.writeLastMaintenance(ctx, s, lm); err != nil {
			return err
		}
	}

	// The maintained spec and the operation annotations, as a compare-and-swap on the state the maintenance was
	// computed from (and our status write): a conflict means the versions may have been chosen from a stale spec, so
	// the maintenance is retried from the start (after a backoff) rather than the write repeated.
	next := proto.CloneOf(cur)
	next.Spec = m.shoot.GetSpec()
	maintainOperation(next)
	r.addTasks(next)
	updated, err := r.c.shoots.Update(ctx, next)
	if err != nil {
		r.recorder.Eventf(ctx, s, controller.EventWarning, EventMaintenanceFailed, "%s", err.Error())
		return fmt.Errorf("update the maintained shoot %s: %w", k, err)
	}
	sh := updated.(*corev1beta1.Shoot)

	// A maintenance with nothing to do after a failed one means the cause went away: the failure is cleared. A
	// processing maintenance has succeeded. These writes depend on lastMaintenance alone, so they apply to the
	// current state of the shoot, whatever else changed meanwhile.
	clean := !m.changed()
	if _, err := updateShoot(ctx, r.c.shoots, k, true, func(cur *corev1beta1.Shoot) bool {
		lm := cur.GetStatus().GetLastMaintenance()
		switch {
		case lm == nil:
			return false
		case clean && lm.GetState() == lastOperationStateFailed:
			lm.State, lm.Description, lm.FailureReason = lastOperationStateSucceeded, "Maintenance succeeded", nil
		case lm.GetState() == lastOperationStateProcessing:
			lm.State = lastOperationStateSucceeded
		default:
			return false
		}
		return true
	}); err != nil {
		return err
	}
	r.recordEvents(ctx, sh, m)
	log.Info("shoot maintenance completed")
	return nil
}

// writeLastMaintenance writes status.lastMaintenance as a compare-and-swap on s and returns the shoot written.
func (r *maintenanceReconciler) writeLastMaintenance(ctx context.Context, s *corev1beta1.Shoot, lm *corev1beta1.LastMaintenance) (*corev1beta1.Shoot, error) {
	next := proto.CloneOf(s)
	if next.Status == nil {
		next.Status = &corev1beta1.ShootStatus{}
	}
	next.Status.LastMaintenance = lm
	out, err := r.c.shoots.UpdateStatus(ctx, next)
	if err != nil {
		return nil, fmt.Errorf("update the last maintenance of shoot %s: %w", key(s), err)
	}
	return out.(*corev1beta1.Shoot), nil
}

func (r *maintenanceReconciler) recordEvents(ctx context.Context, s *corev1beta1.Shoot, m *maintenance) {
	if cp := m.controlPlane; cp != nil {
		if cp.ok {
			r.recorder.Eventf(ctx, s, controller.EventNormal, EventKubernetesVersionMaintenance, "Control Plane: %s. Reason: %s.", cp.description, cp.reason)
		} else {
			r.recorder.Eventf(ctx, s, controller.EventWarning, EventKubernetesVersionMaintenance,
				"Control Plane: Kubernetes version maintenance failed. Reason for update: %s. Error: %v", cp.reason, cp.description)
		}
	}
	for _, set := range []struct {
		results []poolResult
		reason  string
		what    string
	}{{m.poolVersions, EventKubernetesVersionMaintenance, "Kubernetes"}, {m.poolImages, EventMachineImageVersionMaintenance, "Machine image"}} {
		for _, p := range set.results {
			if p.ok {
				r.recorder.Eventf(ctx, s, controller.EventNormal, set.reason, "Worker pool %q: %v. Reason: %s.", p.pool, p.description, p.reason)
				continue
			}
			r.recorder.Eventf(ctx, s, controller.EventWarning, set.reason, "Worker pool %q: %s version maintenance failed. Reason for update: %s. Error: %v",
				p.pool, set.what, p.reason, p.description)
		}
	}
}

// addTasks adds the tasks every maintenance asks of the next reconciliation.
func (r *maintenanceReconciler) addTasks(s *corev1beta1.Shoot) {
	tasks := []string{TaskDeployInfrastructure, TaskDeployDNSRecordInternal, TaskDeployDNSRecordExternal, TaskDeployDNSRecordIngress}
	if r.cfg.RestartControlPlane {
		tasks = append(tasks, TaskRestartControlPlanePods)
	}
	if r.cfg.RestartCoreAddons {
		tasks = append(tasks, TaskRestartCoreAddons)
	}
	var have []string
	if v := s.GetMetadata().GetAnnotations()[AnnotationTasks]; v != "" {
		have = strings.Split(v, tasksSeparator)
	}
	for _, t := range tasks {
		if !slices.Contains(have, t) {
			have = append(have, t)
		}
	}
	setAnnotation(s, AnnotationTasks, strings.Join(have, tasksSeparator))
}

// removeOperation removes op from the shoot's operation annotation; false when it is not there.
func removeOperation(s *corev1beta1.Shoot, op string) bool {
	ops := operations(s.GetMetadata().GetAnnotations()[AnnotationOperation])
	if !slices.Contains(ops, op) {
		return false
	}
	ops = slices.DeleteFunc(ops, func(o string) bool { return o == op })
	if len(ops) == 0 {
		delete(s.Metadata.Annotations, AnnotationOperation)
	} else {
		s.Metadata.Annotations[AnnotationOperation] = strings.Join(ops, operationsSeparator)
	}
	return true
}

// maintainOperation sets the operation annotation a maintenance leaves, as Gardener's maintainOperation: the maintain
// operation goes; a shoot not operated on yet gets nothing; a failed shoot gets retry only when annotated
// maintenance.shoot.gardener.cloud/needs-retry-operation=true (which then goes); any other shoot gets the
// operations of maintenance.gardener.cloud/operation (which goes) and reconcile. It returns the operation set, ""
// for none or for reconcile alone.
func maintainOperation(s *corev1beta1.Shoot) string {
	if hasMaintainOperation(s) {
		delete(s.Metadata.Annotations, AnnotationOperation)
	}
	last := s.GetStatus().GetLastOperation()
	if last == nil {
		return ""
	}
	if last.GetState() == lastOperationStateFailed {
		if s.GetMetadata().GetAnnotations()[AnnotationNeedsRetryOperation] == "true" {
			setAnnotation(s, AnnotationOperation, OperationRetry)
			delete(s.Metadata.Annotations, AnnotationNeedsRetryOperation)
		}
		return ""
	}
	ops := operations(s.GetMetadata().GetAnnotations()[AnnotationMaintenanceOperation])
	if !slices.Contains(ops, OperationReconcile) {
		ops = append(ops, OperationReconcile)
	}
	op := strings.Join(ops, operationsSeparator)
	setAnnotation(s, AnnotationOperation, op)
	delete(s.Metadata.Annotations, AnnotationMaintenanceOperation)
	if op == OperationReconcile {
		return ""
	}
	return op
}

// autoUpdate returns spec.maintenance.autoUpdate's kubernetesVersion and machineImageVersion; unset means true, the
// default Gardener's API gives them.
func autoUpdate(s *corev1beta1.Shoot) (kubernetes, machineImage bool) {
	au := s.GetSpec().GetMaintenance().GetAutoUpdate()
	kubernetes, machineImage = true, true
	if au != nil && au.KubernetesVersion != nil {
		kubernetes = au.GetKubernetesVersion()
	}
	if au != nil && au.MachineImageVersion != nil {
		machineImage = au.GetMachineImageVersion()
	}
	return kubernetes, machineImage
}

// plan computes the maintained shoot from s and the cloud profile: machine images first (against the current control
// plane version), then the control plane's Kubernetes version, then the worker pools' (never above the control
// plane's), then the operation annotation. A failed version maintenance is reported, not fatal; a control plane
// version that cannot be parsed is.
func plan(s *corev1beta1.Shoot, profile *corev1beta1.CloudProfileSpec, now time.Time, log *slog.Logger) (*maintenance, error) {
	m := &maintenance{shoot: proto.CloneOf(s)}
	spec := m.shoot.Spec
	if spec == nil {
		spec = &corev1beta1.ShootSpec{}
		m.shoot.Spec = spec
	}
	if spec.Kubernetes == nil {
		spec.Kubernetes = &corev1beta1.Kubernetes{}
	}
	autoKubernetes, autoImages := autoUpdate(s)
	if len(spec.GetProvider().GetWorkers()) > 0 {
		images, err := maintainMachineImages(spec, profile, autoImages, now)
		if err != nil {
			log.Error("maintaining the machine images failed", "err", err)
		}
		m.poolImages = images
	}
	cp, err := maintainKubernetesVersion(spec.Kubernetes.Version, autoKubernetes, profile.GetKubernetes().GetVersions(), now)
	if err != nil {
		log.Error("maintaining the Kubernetes version failed", "err", err)
	}
	if cp != nil && cp.err == nil {
		spec.Kubernetes.Version = cp.to
	}
	m.controlPlane = kubernetesResult(cp)
	if _, err := semver.NewVersion(s.GetSpec().GetKubernetes().GetVersion()); err != nil {
		return nil, fmt.Errorf("the shoot's Kubernetes version %q: %w", s.GetSpec().GetKubernetes().GetVersion(), err)
	}
	for _, w := range spec.GetProvider().GetWorkers() {
		if w.GetKubernetes() == nil || w.Kubernetes.Version == nil {
			continue
		}
		u, err := maintainKubernetesVersion(w.GetKubernetes().GetVersion(), autoKubernetes, profile.GetKubernetes().GetVersions(), now)
		if err != nil {
			log.Error("maintaining the Kubernetes version of a worker pool failed", "pool", w.GetName(), "err", err)
		}
		if u == nil {
			continue
		}
		if u.err == nil {
			u.to = capVersion(u.to, spec.Kubernetes.Version)
			w.Kubernetes.Version = proto.String(u.to)
		}
		m.poolVersions = append(m.poolVersions, poolResult{pool: w.GetName(), updateResult: *kubernetesResult(u)})
	}
	if op := maintainOperation(m.shoot); op != "" {
		m.operations = append(m.operations, fmt.Sprintf("Added %q operation annotation", op))
	}
	return m, nil
}

// maintainMachineImages updates the machine image versions of the worker pools in spec. An image or machine type
// the cloud profile does not know stops the image maintenance of all pools (the cloud profile is misconfigured).
func maintainMachineImages(spec *corev1beta1.ShootSpec, profile *corev1beta1.CloudProfileSpec, autoUpdate bool, now time.Time) ([]poolResult, error) {
	controlPlane, err := semver.NewVersion(spec.GetKubernetes().GetVersion())
	if err != nil {
		return nil, fmt.Errorf("the shoot's Kubernetes version %q: %w", spec.GetKubernetes().GetVersion(), err)
	}
	var results []poolResult
	for _, w := range spec.GetProvider().GetWorkers() {
		img := w.GetMachine().GetImage()
		if img.GetName() == "" || img.Version == nil {
			continue // no image chosen (Gardener's admission always chooses one)
		}
		if !slices.ContainsFunc(profile.GetMachineTypes(), func(mt *corev1beta1.MachineType) bool { return mt.GetName() == w.GetMachine().GetType() }) {
			return results, fmt.Errorf("machine type %q of worker %q does not exist in cloudprofile", w.GetMachine().GetType(), w.GetName())
		}
		i := slices.IndexFunc(profile.GetMachineImages(), func(mi *corev1beta1.MachineImage) bool { return strings.EqualFold(mi.GetName(), img.GetName()) })
		if i < 0 {
			return results, fmt.Errorf("failure while determining the default machine image in the CloudProfile: no machineImage with name %q (specified in shoot) could be found in the cloudProfile", img.GetName())
		}
		image := profile.GetMachineImages()[i]
		kubelet := controlPlane
		if v := w.GetKubernetes().GetVersion(); v != "" {
			if kubelet, err = semver.NewVersion(v); err != nil {
				return results, fmt.Errorf("the Kubernetes version %q of worker %q: %w", v, w.GetName(), err)
			}
		}
		strategy := image.GetUpdateStrategy()
		if strategy == "" {
			strategy = updateStrategyMajor
		}
		u, err := maintainImageVersion(img.GetName(), img.GetVersion(), strategy, imageVersions(fittingImageVersions(image.GetVersions(), w, kubelet)), autoUpdate, now)
		if err != nil {
			u = &versionUpdate{from: img.GetVersion(), reason: "Machine image maintenance", err: fmt.Errorf("failed to update machine image %q: %w", img.GetName(), err)}
		}
		switch {
		case u == nil:
		case u.err != nil:
			results = append(results, poolResult{pool: w.GetName(), updateResult: updateResult{description: u.err.Error(), reason: u.reason}})
		default:
			results = append(results, poolResult{pool: w.GetName(), updateResult: updateResult{
				description: fmt.Sprintf("Updated machine image %q from %q to %q", img.GetName(), u.from, u.to), reason: u.reason, ok: true}})
			img.Version = proto.String(u.to)
		}
	}
	return results, nil
}

// fittingImageVersions are the versions of a machine image the worker can run: its architecture, its CRI and
// container runtimes, its kubelet version and, for in-place updates, what the current version can be updated to
// (Gardener's FilterMachineImageVersions, without machine capabilities).
func fittingImageVersions(versions []*corev1beta1.MachineImageVersion, w *corev1beta1.Worker, kubelet *semver.Version) []*corev1beta1.MachineImageVersion {
	arch := w.GetMachine().GetArchitecture()
	if arch == "" {
		arch = defaultArchitecture
	}
	criName := w.GetCri().GetName()
	if criName == "" {
		criName = defaultCRI
	}
	inPlace := w.GetUpdateStrategy() == "AutoInPlaceUpdate" || w.GetUpdateStrategy() == "ManualInPlaceUpdate"
	current := w.GetMachine().GetImage().GetVersion()
	var out []*corev1beta1.MachineImageVersion
	for _, v := range versions {
		archs := v.GetArchitectures()
		if len(archs) == 0 {
			archs = []string{defaultArchitecture}
		}
		if !slices.Contains(archs, arch) || !supportsCRI(v, criName, w.GetCri().GetContainerRuntimes()) {
			continue
		}
		if c := v.GetKubeletVersionConstraint(); c != "" {
			constraint, err := semver.NewConstraint(c)
			if err != nil || !constraint.Check(kubelet) {
				continue
			}
		}
		if inPlace && !inPlaceUpdatable(v, current) {
			continue
		}
		out = append(out, v)
	}
	return out
}

func supportsCRI(v *corev1beta1.MachineImageVersion, name string, runtimes []*corev1beta1.ContainerRuntime) bool {
	cris := v.GetCri()
	if len(cris) == 0 {
		cris = []*corev1beta1.CRI{{Name: defaultCRI}}
	}
	i := slices.IndexFunc(cris, func(c *corev1beta1.CRI) bool { return c.GetName() == name })
	if i < 0 {
		return false
	}
	for _, want := range runtimes {
		if !slices.ContainsFunc(cris[i].GetContainerRuntimes(), func(cr *corev1beta1.ContainerRuntime) bool { return cr.GetType() == want.GetType() }) {
			return false
		}
	}
	return true
}

// inPlaceUpdatable reports whether a worker updated in place can run v: v supports in-place updates and is the
// current version or may be updated to from it.
func inPlaceUpdatable(v *corev1beta1.MachineImageVersion, current string) bool {
	if current == "" || !v.GetInPlaceUpdates().GetSupported() {
		return false
	}
	if v.GetVersion() == current {
		return true
	}
	minV, err1 := semver.NewVersion(v.GetInPlaceUpdates().GetMinVersionForUpdate())
	cur, err2 := semver.NewVersion(current)
	return v.GetInPlaceUpdates().MinVersionForUpdate != nil && err1 == nil && err2 == nil && !minV.GreaterThan(cur)
}

// maintenanceMessages builds lastMaintenance's description of all version maintenances, failed ones included, and
// the failure reason of the failed ones ("" when none failed) — Gardener's buildMaintenanceMessages.
func maintenanceMessages(m *maintenance) (description, failure string) {
	var descs, failures []string
	succeeded, failed := 0, 0
	if cp := m.controlPlane; cp != nil {
		if cp.ok {
			succeeded++
			descs = append(descs, fmt.Sprintf("Control Plane: %s. Reason: %s", cp.description, cp.reason))
		} else {
			failed++
			descs = append(descs, fmt.Sprintf("Control Plane: Kubernetes version update failed. Reason for update: %s", cp.reason))
			failures = append(failures, fmt.Sprintf("Control Plane: Kubernetes maintenance failure due to: %s", cp.description))
		}
	}
	for _, p := range m.poolVersions {
		if p.ok {
			succeeded++
			descs = append(descs, fmt.Sprintf("Worker pool %q: %s. Reason: %s", p.pool, p.description, p.reason))
			continue
		}
		failed++
		descs = append(descs, fmt.Sprintf("Worker pool %q: Kubernetes version maintenance failed. Reason for update: %s", p.pool, p.reason))
		failures = append(failures, fmt.Sprintf("Worker pool %q: Kubernetes maintenance failure due to: %s", p.pool, p.description))
	}
	for _, p := range m.poolImages {
		if p.ok {
			succeeded++
			descs = append(descs, fmt.Sprintf("Worker pool %q: %s. Reason: %s", p.pool, p.description, p.reason))
			continue
		}
		failed++
		descs = append(descs, fmt.Sprintf("Worker pool %q: machine image version maintenance failed. Reason for update: %s", p.pool, p.reason))
		failures = append(failures, fmt.Sprintf("Worker pool %q: %s", p.pool, p.description))
	}
	descs = append(descs, m.operations...)
	joined := strings.Join(descs, ", ")
	if failed == 0 {
		return strings.TrimRight("All maintenance operations successful. "+joined, " "), ""
	}
	return strings.TrimRight(fmt.Sprintf("(%d/%d) maintenance operations successful. %s", succeeded, succeeded+failed, joined), " "),
		strings.Join(failures, ", ")
}

// cloudProfile returns the spec of the shoot's CloudProfile, or of its NamespacedCloudProfile (the merged spec in
// its status, its parent's until that is computed).
func (r *maintenanceReconciler) cloudProfile(ctx context.Context, s *corev1beta1.Shoot) (*corev1beta1.CloudProfileSpec, error) {
	kind, name := s.GetSpec().GetCloudProfile().GetKind(), s.GetSpec().GetCloudProfile().GetName()
	if name == "" {
		kind, name = "CloudProfile", s.GetSpec().GetCloudProfileName()
	}
	if name == "" {
		return nil, errors.New("the shoot names no cloud profile")
	}
	if kind == "NamespacedCloudProfile" {
		obj, err := r.c.namespacedCloudProfiles.Get(ctx, s.GetMetadata().GetNamespace(), name)
		if err != nil {
			return nil, fmt.Errorf("read NamespacedCloudProfile %s/%s: %w", s.GetMetadata().GetNamespace(), name, err)
		}
		ncp := obj.(*corev1beta1.NamespacedCloudProfile)
		if merged := ncp.GetStatus().GetCloudProfileSpec(); merged != nil {
			return merged, nil
		}
		name = ncp.GetSpec().GetParent().GetName()
	}
	obj, err := r.c.cloudProfiles.Get(ctx, "", name)
	if err != nil {
		return nil, fmt.Errorf("read CloudProfile %s: %w", name, err)
	}
	return obj.(*corev1beta1.CloudProfile).GetSpec(), nil
}
