package shoot

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/agent/extension"
	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/resources"
)

// Shoot condition types, in the order Gardener lists them.
var shootConditionTypes = []string{
	extensionsv1alpha1.ShootAPIServerAvailable,
	extensionsv1alpha1.ShootControlPlaneHealthy,
	extensionsv1alpha1.ShootObservabilityComponentsReady,
	extensionsv1alpha1.ShootEveryNodeReady,
	extensionsv1alpha1.ShootSystemComponentsHealthy,
}

// conditions computes the shoot's conditions from the health its extensions report, as gardenlet's shoot care does:
// every extension condition of a shoot condition type is merged into it (the worst status wins; the codes are
// collected), and from the agent's own checks of a control plane that runs in the seed (ownChecks: the API server's
// /livez and /readyz, the control plane's workloads, the shoot's nodes and system pods). Without a control plane in
// the seed, APIServerAvailable means the ControlPlane extension object is ready. Workerless shoots have no
// EveryNodeReady. It returns nil when the seed could not be read.
func (op *operation) conditions(ctx context.Context) json.RawMessage {
	conds, err := op.c.shootConditions(ctx, op.shoot, op.ns)
	if err != nil {
		op.log.Warn("could not compute the shoot's conditions", "err", err)
		return nil
	}
	return conds
}

// severity orders condition statuses from good to bad.
func severity(s extensionsv1alpha1.ConditionStatus) int {
	switch s {
	case extensionsv1alpha1.ConditionTrue:
		return 0
	case extensionsv1alpha1.ConditionProgressing:
		return 1
	case extensionsv1alpha1.ConditionUnknown:
		return 2
	default:
		return 3
	}
}

// shootConditions reads the extension objects in the namespace and returns the shoot's conditions as JSON.
func (c *Controller) shootConditions(ctx context.Context, s *corev1beta1.Shoot, ns string) (json.RawMessage, error) {
	type merged struct {
		status   extensionsv1alpha1.ConditionStatus
		reports  []string
		problems []string
		codes    []string
	}
	agg := map[string]*merged{}
	cpReady := fmt.Errorf("the control plane is not deployed yet")
	for _, l := range namespacedExtensionLists() {
		if err := c.cfg.Seed.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("list %T: %w", l, err)
		}
		items, err := extensionItems(l)
		if err != nil {
			return nil, err
		}
		for _, o := range items {
			if _, ok := o.(*extensionsv1alpha1.ControlPlane); ok && o.GetName() == s.GetMetadata().GetName() {
				cpReady = extension.CheckReady(o, "")
			}
			for _, cond := range o.GetExtensionStatus().Conditions {
				if !slices.Contains(shootConditionTypes, cond.Type) || cond.Type == extensionsv1alpha1.ShootAPIServerAvailable {
					continue // unknown types are ignored; APIServerAvailable is not the extensions' to report
				}
				m := agg[cond.Type]
				if m == nil {
					m = &merged{status: extensionsv1alpha1.ConditionTrue}
					agg[cond.Type] = m
				}
				m.reports = append(m.reports, extension.Describe(o))
				if severity(cond.Status) > severity(m.status) {
					m.status = cond.Status
				}
				if cond.Status != extensionsv1alpha1.ConditionTrue {
					m.problems = append(m.problems, fmt.Sprintf("%s: %s", extension.Describe(o), cond.Message))
				}
				for _, code := range cond.Codes {
					m.codes = append(m.codes, string(code))
				}
			}
		}
	}
	now := timestamppb.New(c.cfg.Now().UTC().Truncate(time.Second))
	previous := map[string]*metav1.Condition{}
	for _, pc := range s.GetStatus().GetConditions() {
		previous[pc.GetType()] = pc
	}
	workerless := len(s.GetSpec().GetProvider().GetWorkers()) == 0
	own := c.ownChecks(ctx, s, ns)
	var out []json.RawMessage
	for _, t := range shootConditionTypes {
		if t == extensionsv1alpha1.ShootEveryNodeReady && workerless {
			continue
		}
		cond := &metav1.Condition{Type: t, LastUpdateTime: now}
		switch m := agg[t]; {
		case t == extensionsv1alpha1.ShootAPIServerAvailable:
			if cpReady == nil {
				cond.Status, cond.Reason, cond.Message = "True", "ControlPlaneReady", "The shoot's ControlPlane is ready (Trellis seeds run no shoot API server to probe)."
			} else {
				cond.Status, cond.Reason, cond.Message = "False", "ControlPlaneNotReady", cpReady.Error()
			}
		case m == nil:
			cond.Status, cond.Reason, cond.Message = "True", "NoExtensionReports", "No extension reports problems for this condition."
		case m.status == extensionsv1alpha1.ConditionTrue:
			cond.Status, cond.Reason = "True", strings.TrimSuffix(t, "Healthy")+"RunningAndHealthy"
			cond.Message = fmt.Sprintf("All %d extension reports are healthy (%s).", len(m.reports), strings.Join(m.reports, ", "))
		default:
			cond.Status, cond.Reason = string(m.status), strings.TrimSuffix(t, "Healthy")+"UnhealthyReport"
			cond.Message = strings.Join(m.problems, "; ")
			slices.Sort(m.codes)
			cond.Codes = slices.Compact(m.codes)
		}
		if oc, ok := own[t]; ok {
			// The agent's own check of what runs in the seed and the shoot, merged with the extensions' reports: the
			// worse wins; with both healthy, the agent's says what was checked.
			if m := agg[t]; m == nil || severity(oc.status) >= severity(m.status) {
				cond.Status, cond.Reason, cond.Message, cond.Codes = string(oc.status), oc.reason, oc.message, nil
				if m != nil && m.status != extensionsv1alpha1.ConditionTrue {
					cond.Message += " " + strings.Join(m.problems, "; ")
				}
			}
		}
		cond.LastTransitionTime = now
		if p := previous[t]; p != nil && p.GetStatus() == cond.Status && p.GetLastTransitionTime() != nil {
			cond.LastTransitionTime = p.GetLastTransitionTime()
		}
		out = append(out, jsonOf(cond))
	}
	// Other writers' conditions stay, as gardenlet's care merges its own into the shoot's (MergeConditions): the hub
	// copies the Seed's conditions into a shoot that a ManagedSeed registers (GardenletReady, ExtensionsReady, ...).
	// Written without them, the shoot's health label would flip between the two writes.
	for _, pc := range s.GetStatus().GetConditions() {
		if !slices.Contains(shootConditionTypes, pc.GetType()) {
			out = append(out, jsonOf(pc))
		}
	}
	return json.Marshal(out)
}

// careLoop refreshes the conditions of the seed's shoots every CareInterval, as gardenlet's shoot care does, for
// shoots whose last operation succeeded and that no flow is working on. A condition is written only when it changed.
func (c *Controller) careLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.CareInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, key := range c.cfg.Cache.Keys(resources.Shoots) {
			if ctx.Err() != nil {
				return
			}
			c.care(ctx, key)
		}
	}
}

// care recomputes one shoot's conditions.
func (c *Controller) care(ctx context.Context, key string) {
	s := c.current(key)
	if s == nil || s.GetSpec().GetSeedName() != c.cfg.SeedName || s.GetStatus().GetSeedName() != c.cfg.SeedName ||
		s.GetMetadata().GetDeletionTimestamp() != nil || s.GetStatus().GetLastOperation().GetState() != stateSucceeded {
		return
	}
	if c.Running(key) != FlowNone {
		return
	}
	ns := s.GetStatus().GetTechnicalId()
	if ns == "" {
		return
	}
	conds, err := c.shootConditions(ctx, s, ns)
	if err != nil {
		c.log.Warn("shoot care failed", "shoot", key, "err", err)
		return
	}
	if sameConditions(s.GetStatus().GetConditions(), conds) {
		return
	}
	if _, err := c.patchStatus(ctx, s, statusPatch{"conditions": conds}); err != nil {
		c.log.Warn("shoot care could not write the conditions", "shoot", key, "err", err)
	}
}

// sameConditions reports whether the conditions in JSON have the statuses, reasons, messages and codes of cur.
func sameConditions(cur []*metav1.Condition, next json.RawMessage) bool {
	var parsed []struct {
		Type, Status, Reason, Message string
		Codes                         []string
	}
	if err := json.Unmarshal(next, &parsed); err != nil || len(parsed) != len(cur) {
		return false
	}
	for i, p := range parsed {
		c := cur[i]
		if p.Type != c.GetType() || p.Status != c.GetStatus() || p.Reason != c.GetReason() || p.Message != c.GetMessage() || !slices.Equal(p.Codes, c.GetCodes()) {
			return false
		}
	}
	return true
}
