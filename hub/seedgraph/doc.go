// Package seedgraph owns the hub's view of which objects belong to which seed: the relationship graph in the spirit
// of Gardener's SeedAuthorizer graph. An object belongs to a seed directly (its Seed, shoots with spec.seedName or
// status.seedName, BackupBuckets, BackupEntries, Bastions, ControllerInstallations, the seed's Lease, namespace
// seed-<name> and its secrets, the seed's CSRs) or through references from an object that belongs (a shoot's
// bindings, their secrets, its cloud profile, its BackupEntry, ...), or by inheriting from an object that belongs (a ManagedSeed from its
// shoot, a BackupEntry from the shoot owning it). Membership is kept incrementally with per-seed reference counts,
// so a change costs O(what it changes), and every change of membership or of a member object is announced to
// subscribers (the agent link's sessions) while the graph's lock is held, in the order the graph processed it.
//
// A referenced object that does not exist keeps its node while it is referenced: the seeds of the objects that
// reference it have a path to it (HasPath), as in Gardener's graph, so their agents may learn that it is missing.
//
// The graph also keeps, per seed and object, the revision since which the object belongs to the seed, so a session
// can resume from the version an agent last synced: an object whose state and membership are both older than that
// version is already held by the agent.
package seedgraph
