// Package managedseedset owns the controller-manager's ManagedSeedSet controller (Gardener's managedseedset
// controller of gardener-controller-manager): it keeps spec.replicas pairs of a Shoot and a ManagedSeed, both named
// <set>-<ordinal> in the set's namespace, created from spec.shootTemplate and spec.template (the placeholder
// "replica-name" in the shoot's spec.dns.domain and in the seed template's spec.ingress.domain becomes the replica's
// name), labelled by the templates (which the selector matches) and owned by the set (controller reference). The
// ordinal comes from status.nextReplicaNumber, which only grows.
//
// One replica at a time. The replica the controller waits for is status.pendingReplica, with Gardener's reasons:
//
//   - scale out creates the Shoot (ShootReconciling); once its reconciliation succeeded the ManagedSeed
//     (ManagedSeedPreparing); once the ManagedSeed registered its seed, the Seed must be ready (SeedNotReady) and the
//     Shoot healthy (ShootNotHealthy) before the next replica starts;
//   - a Shoot whose reconciliation failed is retried (gardener.cloud/operation=retry) up to maxShootRetries times
//     (pendingReplica.retries counts them, under the reason ShootReconciling), then the replica is left pending at
//     ShootReconcileFailed; as in Gardener, the next look at the set (the sync period, or a change) counts from zero
//     again, so a failing Shoot gets up to maxShootRetries retries per sync period. A failed deletion likewise
//     (ShootDeleting, ShootDeleteFailed);
//   - scale in deletes one replica at a time, the one of lowest priority by Gardener's order: the least advanced
//     status first (failed shoots, then reconciling, deleting, reconciled, then replicas with a ManagedSeed), then a
//     seed that is not ready, then the worse shoot health (label shoot.gardener.cloud/status), then the LOWER
//     ordinal (Gardener keeps the newest replicas). Its ManagedSeed goes first (ManagedSeedDeleting), then its Shoot,
//     confirmed with confirmation.gardener.cloud/deletion=true (ShootDeleting). A replica whose seed hosts shoots, or
//     whose Shoot or ManagedSeed is annotated seedmanagement.gardener.cloud/protect-from-deletion=true, is never
//     chosen;
//   - a set being deleted scales in to zero, then loses its finalizer "gardener".
//
// Status: observedGeneration, replicas, readyReplicas (ManagedSeed registered, Seed ready, Shoot healthy),
// nextReplicaNumber and pendingReplica, as Gardener writes them. Gardener sets no conditions on a ManagedSeedSet and
// does not roll template changes out to existing replicas (updateStrategy, the revisions and currentReplicas /
// updatedReplicas are API fields its controller does not act on), so neither does the hub.
//
// Objects are created as Gardener's controller creates them through the API server: the Shoot and the ManagedSeed
// get the kind's defaults and pass its validation and admission checks (package admission: the Shoot's project, cloud
// profile, versions, machine types, bindings) before they are stored, so a template that makes an invalid Shoot fails
// the reconciliation with a ReconcileError Event and is retried with backoff. The API server's project quotas are not
// applied to them.
//
// Triggers. The controller looks at a set when its spec changes (generation) or it is being deleted; when a Shoot or
// ManagedSeed it controls appears, goes or changes in a way its rules read (the shoot's operation outcome, health,
// deletion and protection; the ManagedSeed's registration, deletion and protection); when the Seed of one of its
// ManagedSeeds appears, goes or turns ready or not; and every syncPeriod (default 30 min). Status heartbeats, its own
// status writes and its own annotations trigger nothing.
//
// A seed's BackupBucketsReady holds its replica back only when the seed has spec.backup. Gardener looks at it on every
// seed that reports it; a seed that never had a bucket reports none (hub/controller/seed), but one whose spec.backup
// was removed keeps it Unknown (BackupBucketsGone) once its bucket is gone, and would hold its set back forever.
//
// Deliberate differences from Gardener, all about counting retries once: a failed Shoot that still carries the retry
// it was given, or that shows the very failure already retried (the agent removes the annotation, then reports its new
// operation; the leader remembers which failure it retried), is waited for, not retried and counted again; and
// waiting for a retried Shoot keeps pendingReplica.retries instead of resetting it. Gardener gets most of this from
// predicates that look at the set only when the pending Shoot's operation ended; the hub's watches are less selective,
// so the rule lives in the reconciler.
//
// The agent of the seed hosting a replica's Shoot plays gardenlet's managedseed controller (agent/managedseed): it
// deploys an agent into the Shoot, which registers the Seed, and marks the ManagedSeed SeedRegistered. The tests of
// this package play that part themselves.
package managedseedset
