// Package controller owns the generic reconciler of extension resources: one controller-runtime controller per kind
// and type (Add), driving an Actuator the extension author writes, with Gardener's contract around it.
//
// When it runs. The predicates admit objects of the registered spec.type and class, and of those only the events on
// which Gardener's extensions act (DefaultPredicate): the agent's operation annotation (reconcile, restore, migrate),
// a deletion, or an unfinished last operation on create (the retry after a restart). Each run reads the object live
// and does nothing if it no longer asks for work (an event queued behind the run that did it), except when retrying
// a failed run. An object annotated wait-for-state is left alone; reconcile is removed before the work starts.
// Annotations are removed with a JSON patch that first tests their value, so that a request the agent wrote meanwhile
// is not removed with the one that was served.
//
// What it does. It reads the Cluster named after the object's namespace (none is fine: the seed's garden namespace
// and cluster-scoped kinds have none), skips objects of a shoot whose last operation Failed, computes the operation
// (ComputeOperationType), skips migrated objects (ShouldSkipOperation) and dispatches:
//
//   - migrate: Processing, Migrator.Migrate (optional), Succeeded, finalizer removed, annotation removed;
//   - delete (only with the finalizer): Processing, ForceDeleter.ForceDelete when the Cluster's Shoot carries
//     confirmation.gardener.cloud/force-deletion=true and the actuator has it, else Delete; Succeeded, finalizer removed;
//   - restore: finalizer, Processing, ConfigValidator, Restorer.Restore (default Reconcile), annotation removed,
//     Succeeded;
//   - create or reconcile: finalizer, Processing, ConfigValidator, Reconcile, Succeeded.
//
// Processing is progress 1; Succeeded is 100 with observedGeneration and no lastError; a failure is Error at 50 with
// lastError (the codes of the error chain, see extsdk.WithCodes, plus AddArgs.KnownCodes) and observedGeneration,
// and the request is retried with the controller's backoff, or after the delay of an extsdk.RequeueAfter error. All
// status writes are merge patches of the status subresource; the final one also carries the status fields the
// actuator set on the object. lastUpdateTime is never before the agent's gardener.cloud/timestamp annotation, which
// the agent's readiness check compares it with.
//
// Files: add.go (AddArgs, Add), actuator.go (the interfaces), reconciler.go (dispatch, finalizer, annotation),
// status.go (the status protocol), operation.go (operation type), predicate.go (event filters).
package controller
