package shoot

import (
	"slices"
	"strings"
	"time"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Flow is what the controller does with a Shoot.
type Flow int

// Flows.
const (
	// FlowNone: nothing to do now (another seed's shoot, a Failed operation, or up to date).
	FlowNone Flow = iota
	// FlowReconcile deploys the shoot; Decision.Type says Create, Reconcile or Restore.
	FlowReconcile
	// FlowDelete deletes the shoot's resources in the seed and then its finalizer.
	FlowDelete
	// FlowMigrate hands the shoot over to another seed.
	FlowMigrate
)

func (f Flow) String() string {
	return [...]string{"none", "reconcile", "delete", "migrate"}[f]
}

// Operation types and states of Shoot.status.lastOperation.
const (
	opCreate    = "Create"
	opReconcile = "Reconcile"
	opDelete    = "Delete"
	opMigrate   = "Migrate"
	opRestore   = "Restore"

	stateProcessing = "Processing"
	stateSucceeded  = "Succeeded"
	stateError      = "Error"
	stateFailed     = "Failed"
)

// Shoot annotations the controller acts on.
const (
	annotationOperation = "gardener.cloud/operation"
	operationReconcile  = "reconcile"
	operationRetry      = "retry"
	// FinalizerGardener is the finalizer the agent keeps on Shoots it has resources for, as gardenlet does.
	FinalizerGardener = "gardener"
)

// Decision is the outcome of decide.
type Decision struct {
	Flow Flow
	// Type is the lastOperation type of the flow (Create, Reconcile, Restore, Delete, Migrate).
	Type string
	// RequeueAfter, when positive with FlowNone, is when to look again (the sync period's end).
	RequeueAfter time.Duration
	// Reason says why, for logs.
	Reason string
	// Retry marks an automatic retry of an operation that ended in Error: the controller backs off before it.
	Retry bool
}

// decide applies gardenlet's rules to a Shoot for the agent of seed. syncPeriod is how often an up-to-date shoot is
// reconciled anyway.
func decide(seed string, s *corev1beta1.Shoot, now time.Time, syncPeriod time.Duration) Decision {
	md, spec, st := s.GetMetadata(), s.GetSpec(), s.GetStatus()
	specSeed, statusSeed := spec.GetSeedName(), st.GetSeedName()
	last := st.GetLastOperation()

	// Migration: the shoot moved away while its control plane is still here.
	if specSeed != seed {
		if statusSeed == seed && md.GetDeletionTimestamp() == nil {
			return Decision{Flow: FlowMigrate, Type: opMigrate, Reason: "spec.seedName moved to " + specSeed}
		}
		if statusSeed == seed && md.GetDeletionTimestamp() != nil {
			// Deleted while migrating away: clean up here, as the source of a control plane migration must.
			return Decision{Flow: FlowDelete, Type: opDelete, Reason: "deleted while on this seed"}
		}
		return Decision{Flow: FlowNone, Reason: "not scheduled to this seed"}
	}
	if statusSeed != "" && statusSeed != seed {
		return Decision{Flow: FlowNone, Reason: "migration from " + statusSeed + " in progress"}
	}
	if md.GetDeletionTimestamp() != nil {
		if !hasFinalizer(md.GetFinalizers(), FinalizerGardener) {
			return Decision{Flow: FlowNone, Reason: "deleting, no finalizer of ours"}
		}
		return Decision{Flow: FlowDelete, Type: opDelete, Reason: "deletionTimestamp set"}
	}
	opType := opReconcile
	switch {
	case last == nil:
		return Decision{Flow: FlowReconcile, Type: opCreate, Reason: "new shoot"}
	case last.GetType() == opMigrate && statusSeed == "":
		return Decision{Flow: FlowReconcile, Type: opRestore, Reason: "migrated from another seed"}
	case (last.GetType() == opCreate || last.GetType() == opRestore) && last.GetState() != stateSucceeded:
		opType = last.GetType()
	}
	op := md.GetAnnotations()[annotationOperation]
	switch {
	case slices.ContainsFunc(operationsOf(op), takenUp):
		return Decision{Flow: FlowReconcile, Type: opType, Reason: "operation annotation " + op}
	case md.GetGeneration() != st.GetObservedGeneration():
		return Decision{Flow: FlowReconcile, Type: opType, Reason: "generation moved"}
	case last.GetState() == stateFailed:
		return Decision{Flow: FlowNone, Reason: "last operation failed; waiting for a spec change or gardener.cloud/operation=retry"}
	case last.GetState() == stateError:
		return Decision{Flow: FlowReconcile, Type: opType, Reason: "retrying after an error", Retry: true}
	case last.GetState() != stateSucceeded:
		return Decision{Flow: FlowReconcile, Type: opType, Reason: "last operation " + strings.ToLower(last.GetState())}
	case last.GetType() == opDelete || last.GetType() == opMigrate:
		// A Delete that succeeded means the shoot is going away; a Migrate that succeeded with status.seedName
		// still here cannot happen (the migrate clears it) and is handled above otherwise.
		return Decision{Flow: FlowReconcile, Type: opReconcile, Reason: "last operation " + last.GetType()}
	}
	if syncPeriod > 0 {
		if t := last.GetLastUpdateTime(); t != nil {
			if wait := t.AsTime().Add(syncPeriod).Sub(now); wait > 0 {
				return Decision{Flow: FlowNone, RequeueAfter: wait, Reason: "up to date"}
			}
		}
		return Decision{Flow: FlowReconcile, Type: opReconcile, Reason: "sync period passed"}
	}
	return Decision{Flow: FlowNone, Reason: "up to date"}
}

func hasFinalizer(fs []string, f string) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

// TechnicalID is the name of a shoot's namespace in the seed: "shoot--<project>--<name>", as Gardener names it.
func TechnicalID(project, name string) string { return "shoot--" + project + "--" + name }

// projectOf is the project of a shoot in namespace ns when no Project says otherwise: Gardener's project namespaces
// are "garden-<project>", and shoots in "garden" belong to project "garden".
func projectOf(ns string) string {
	if p, ok := strings.CutPrefix(ns, "garden-"); ok && p != "" {
		return p
	}
	return ns
}
