package shoot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/agent/cache"
	"github.com/trellis-dev/trellis/agent/extension"
	"github.com/trellis-dev/trellis/agent/flow"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	corev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	securityv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/security/v1alpha1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// operation is one run of a flow for one shoot: the shoot as it was when the run started and everything the flow
// reads from the hub (Gardener's Botanist and Operation).
type operation struct {
	c     *Controller
	log   *slog.Logger
	d     Decision
	shoot *corev1beta1.Shoot
	seed  *corev1beta1.Seed
	// project is the shoot's project; ns its namespace in the seed (shoot--<project>--<name>).
	project, ns  string
	cloudProfile *corev1beta1.CloudProfile
	// credentials is the secret of the shoot's credentials binding; nil when there is none.
	credentials *corev1.Secret
	// registrations are the ControllerRegistrations the agent knows, for the Extension lifecycles.
	registrations []*corev1beta1.ControllerRegistration
	// state is the ShootState to restore from (restore only).
	state *corev1beta1.ShootState
	ext   *extension.Client
	// controlPlane reports whether the agent runs the shoot's control plane in the seed (else a stand-in Service).
	controlPlane bool
}

// newOperation gathers what a flow for s needs. Missing references are errors the shoot shows until they appear.
func (c *Controller) newOperation(ctx context.Context, s *corev1beta1.Shoot, d Decision, log *slog.Logger) (*operation, error) {
	s = proto.Clone(s).(*corev1beta1.Shoot)
	op := &operation{c: c, log: log, d: d, shoot: s, ext: c.ext}
	seed, ok := cache.Get[*corev1beta1.Seed](c.cfg.Cache, resources.Seeds, "", c.cfg.SeedName)
	if !ok {
		return nil, fmt.Errorf("seed %s is not known to the agent yet", c.cfg.SeedName)
	}
	op.seed = seed
	op.project = projectOf(s.GetMetadata().GetNamespace())
	for _, p := range cache.List[*corev1beta1.Project](c.cfg.Cache, resources.Projects) {
		if p.GetSpec().GetNamespace() == s.GetMetadata().GetNamespace() {
			op.project = p.GetMetadata().GetName()
			break
		}
	}
	op.ns = TechnicalID(op.project, s.GetMetadata().GetName())
	if id := s.GetStatus().GetTechnicalId(); id != "" {
		op.ns = id // a shoot keeps its technical ID, also across migrations
	}
	op.registrations = cache.List[*corev1beta1.ControllerRegistration](c.cfg.Cache, resources.ControllerRegistrations)
	cp, err := c.deploysControlPlane(ctx)
	if err != nil {
		return nil, err
	}
	op.controlPlane = cp
	if d.Flow == FlowDelete {
		return op, nil // deletion needs nothing but what is in the seed
	}
	cpName := s.GetSpec().GetCloudProfileName()
	if ref := s.GetSpec().GetCloudProfile(); ref.GetName() != "" && (ref.GetKind() == "" || ref.GetKind() == "CloudProfile") {
		cpName = ref.GetName()
	}
	if cpName != "" {
		if cp, ok := cache.Get[*corev1beta1.CloudProfile](c.cfg.Cache, resources.CloudProfiles, "", cpName); ok {
			op.cloudProfile = cp
		}
	}
	if op.cloudProfile == nil && cpName != "" {
		return nil, fmt.Errorf("cloud profile %q of the shoot is not known to the agent yet", cpName)
	}
	creds, err := c.credentialsOf(s)
	if err != nil {
		return nil, err
	}
	op.credentials = creds
	if d.Type == opRestore {
		st, err := c.states.Get(ctx, &metav1.GetRequest{Namespace: s.GetMetadata().GetNamespace(), Name: s.GetMetadata().GetName()})
		switch status.Code(err) {
		case codes.OK:
			op.state = st
		case codes.NotFound:
			op.state = &corev1beta1.ShootState{}
		default:
			return nil, fmt.Errorf("read the ShootState to restore from: %w", err)
		}
	}
	return op, nil
}

// credentialsOf finds the secret of the shoot's SecretBinding or CredentialsBinding.
func (c *Controller) credentialsOf(s *corev1beta1.Shoot) (*corev1.Secret, error) {
	ns := s.GetMetadata().GetNamespace()
	var secretNS, secretName string
	switch {
	case s.GetSpec().GetCredentialsBindingName() != "":
		b, ok := cache.Get[*securityv1alpha1.CredentialsBinding](c.cfg.Cache, resources.CredentialsBindings, ns, s.GetSpec().GetCredentialsBindingName())
		if !ok {
			return nil, fmt.Errorf("credentials binding %s/%s is not known to the agent yet", ns, s.GetSpec().GetCredentialsBindingName())
		}
		ref := b.GetCredentialsRef()
		if ref.GetKind() != "Secret" {
			return nil, flow.Permanent(fmt.Errorf("credentials binding %s/%s refers to a %s; only Secrets are supported", ns, b.GetMetadata().GetName(), ref.GetKind()))
		}
		secretNS, secretName = ref.GetNamespace(), ref.GetName()
	case s.GetSpec().GetSecretBindingName() != "":
		b, ok := cache.Get[*corev1beta1.SecretBinding](c.cfg.Cache, resources.SecretBindings, ns, s.GetSpec().GetSecretBindingName())
		if !ok {
			return nil, fmt.Errorf("secret binding %s/%s is not known to the agent yet", ns, s.GetSpec().GetSecretBindingName())
		}
		secretNS, secretName = b.GetSecretRef().GetNamespace(), b.GetSecretRef().GetName()
		if secretNS == "" {
			secretNS = ns
		}
	default:
		return nil, nil // a workerless shoot may have none
	}
	sec, ok := cache.Get[*corev1.Secret](c.cfg.Cache, resources.Secrets, secretNS, secretName)
	if !ok {
		return nil, fmt.Errorf("credentials secret %s/%s is not known to the agent yet", secretNS, secretName)
	}
	return sec, nil
}

// run runs the operation's flow, reporting progress as the tasks end, and the outcome.
func (op *operation) run(ctx context.Context) error {
	c := op.c
	var g *flow.Graph
	switch op.d.Flow {
	case FlowReconcile:
		if err := c.ensureFinalizer(ctx, op.shoot); err != nil {
			c.reportError(ctx, op.shoot, op.d, err, 0)
			return err
		}
		g = op.reconcileGraph()
	case FlowDelete:
		g = op.deleteGraph()
	case FlowMigrate:
		g = op.migrateGraph()
	default:
		return nil
	}
	start := statusPatch{
		"lastOperation": lastOperationJSON(op.d.Type, stateProcessing, 0, fmt.Sprintf("%s of the shoot started", op.d.Type), c.cfg.Now()),
	}
	if c.cfg.Identity != nil {
		// The gardenlet that operates the shoot names itself, as gardenlet does at every operation's start.
		start["gardener"] = jsonOf(c.cfg.Identity)
	}
	if op.d.Flow == FlowReconcile {
		start["technicalID"] = op.ns
		start["uid"] = op.shoot.GetMetadata().GetUid()
		start["seedName"] = c.cfg.SeedName
		// The rotations the annotation asks for go into the status before the annotation goes, as gardenlet
		// orders it: an agent that stops in between finds the annotation again and the rotation already started.
		if startRotations(op.shoot, c.cfg.Now()) {
			start["credentials"] = credentialsPatch(op.shoot)
		}
	}
	if _, err := c.patchStatus(ctx, op.shoot, start); err != nil {
		return err
	}
	if op.d.Flow == FlowReconcile {
		if err := c.clearOperationAnnotation(ctx, op.shoot); err != nil {
			c.reportError(ctx, op.shoot, op.d, err, 0)
			return err
		}
	}
	var percent atomic.Int32 // of the last finished task, for the error report
	progress := make(chan flow.Progress, 64)
	reporter := make(chan struct{})
	go func() { // report progress without holding up the flow; only the newest report matters
		defer close(reporter)
		for p := range progress {
			for more := true; more; {
				select {
				case q, ok := <-progress:
					if !ok {
						more = false
						break
					}
					p = q
				default:
					more = false
				}
			}
			desc := p.Description()
			if desc == "" {
				desc = "Finished " + p.Finished
			}
			if _, err := c.patchStatus(ctx, op.shoot, statusPatch{
				"lastOperation": lastOperationJSON(op.d.Type, stateProcessing, p.Percent, desc, c.cfg.Now()),
			}); err != nil {
				op.log.Warn("could not report progress", "err", err)
			}
		}
	}()
	err := g.Run(ctx, flow.Opts{Log: op.log, OnProgress: func(p flow.Progress) {
		percent.Store(p.Percent)
		select {
		case progress <- p:
		default:
		}
	}})
	close(progress)
	<-reporter
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		c.reportError(ctx, op.shoot, op.d, err, percent.Load())
		return err
	}
	return op.succeeded(ctx)
}

// succeeded reports the operation's success. After a delete, the finalizer goes and the hub removes the shoot;
// after a migrate, status.seedName is cleared so that the destination restores.
func (op *operation) succeeded(ctx context.Context) error {
	c := op.c
	now := c.cfg.Now()
	switch op.d.Flow {
	case FlowDelete:
		return c.removeFinalizer(ctx, op.shoot)
	case FlowMigrate:
		_, err := c.patchStatus(ctx, op.shoot, statusPatch{
			"lastOperation": lastOperationJSON(opMigrate, stateSucceeded, 100, "Shoot cluster control plane migrated to "+op.shoot.GetSpec().GetSeedName(), now),
			"lastErrors":    nil,
			"seedName":      nil,
			"conditions":    nil,
		})
		return err
	}
	desc := "Shoot cluster has been successfully reconciled."
	switch op.d.Type {
	case opCreate:
		desc = "Shoot cluster has been successfully created."
	case opRestore:
		desc = "Shoot cluster has been successfully restored."
	}
	p := statusPatch{
		"lastOperation":      lastOperationJSON(op.d.Type, stateSucceeded, 100, desc, now),
		"lastErrors":         nil,
		"observedGeneration": op.shoot.GetMetadata().GetGeneration(),
		"hibernated":         op.hibernated(),
		"seedName":           c.cfg.SeedName,
		"technicalID":        op.ns,
		"uid":                op.shoot.GetMetadata().GetUid(),
	}
	if finishRotations(op.shoot, now) {
		p["credentials"] = credentialsPatch(op.shoot)
	}
	if conds := op.conditions(ctx); conds != nil {
		p["conditions"] = conds
	}
	if _, err := c.patchStatus(ctx, op.shoot, p); err != nil {
		return err
	}
	if op.d.Type == opRestore {
		// The state was restored into the extension objects; gardenlet deletes the ShootState after a restore.
		if err := c.deleteShootState(ctx, op.shoot); err != nil {
			op.log.Warn("could not delete the ShootState after the restore", "err", err)
		}
	}
	return nil
}

func (op *operation) hibernated() bool { return op.shoot.GetSpec().GetHibernation().GetEnabled() }

// ensureFinalizer adds the "gardener" finalizer to the shoot, as gardenlet does before it creates anything.
func (c *Controller) ensureFinalizer(ctx context.Context, s *corev1beta1.Shoot) error {
	_, err := c.shoots.AddFinalizer(ctx, s, FinalizerGardener)
	return err
}

// removeFinalizer removes the "gardener" finalizer: the hub then deletes a shoot being deleted. A shoot that is gone
// already is fine.
func (c *Controller) removeFinalizer(ctx context.Context, s *corev1beta1.Shoot) error {
	_, err := c.shoots.RemoveFinalizer(ctx, s, FinalizerGardener)
	if status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

// clearOperationAnnotation removes the operations the reconcile flow takes up (reconcile, retry and the credentials
// rotations) from the shoot's gardener.cloud/operation annotation as the flow starts; others (maintain, which the
// hub's maintenance takes up) stay.
func (c *Controller) clearOperationAnnotation(ctx context.Context, s *corev1beta1.Shoot) error {
	_, err := c.shoots.Update(ctx, s, func(cur *corev1beta1.Shoot) bool {
		v, ok := cur.GetMetadata().GetAnnotations()[annotationOperation]
		if !ok {
			return false
		}
		rest := remainingOperations(v)
		if rest == v {
			return false
		}
		if rest == "" {
			delete(cur.Metadata.Annotations, annotationOperation)
		} else {
			cur.Metadata.Annotations[annotationOperation] = rest
		}
		return true
	})
	return err
}

// deleteShootState deletes the shoot's ShootState; a missing one is fine.
func (c *Controller) deleteShootState(ctx context.Context, s *corev1beta1.Shoot) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HubTimeout)
	defer cancel()
	_, err := c.states.Delete(ctx, &metav1.DeleteRequest{Namespace: s.GetMetadata().GetNamespace(), Name: s.GetMetadata().GetName()})
	if err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("delete ShootState %s: %w", keyOf(s), err)
	}
	return nil
}

// taskError is one failed task of a flow.
type taskError struct {
	task string
	err  error
}

// taskErrors splits err into the failed tasks of a flow, or one untitled error.
func taskErrors(err error) []taskError {
	var fe *flow.Error
	if errors.As(err, &fe) {
		out := make([]taskError, 0, len(fe.Failed))
		for _, n := range fe.Tasks() {
			out = append(out, taskError{task: n, err: fe.Failed[n]})
		}
		return out
	}
	return []taskError{{err: err}}
}

// timeout is the per-task timeout of the operation's flows.
func (op *operation) timeout() time.Duration { return op.c.cfg.TaskTimeout }

func cacheSecret(c *Controller, namespace, name string) (*corev1.Secret, bool) {
	return cache.Get[*corev1.Secret](c.cfg.Cache, resources.Secrets, namespace, name)
}

func cacheConfigMap(c *Controller, namespace, name string) (*corev1.ConfigMap, bool) {
	return cache.Get[*corev1.ConfigMap](c.cfg.Cache, resources.ConfigMaps, namespace, name)
}
