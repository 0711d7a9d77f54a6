// Package cache owns the agent's local copy of what the hub assigned to its seed: every object the hub streamed on
// the agent link, keyed by resource (a name of proto/resources: "shoots.core.gardener.cloud", "secrets", ...) and
// "namespace/name" (or "name" for cluster-scoped objects), with the synced version per resource that the agent
// resumes from, and event handlers in the style of client-go's ResourceEventHandlerFuncs that the agent's controllers
// (and extension authors' code inside the agent) use to enqueue work.
//
// The session that owns the agent link writes (Apply, CompleteSync); everyone else reads (Get, List, the typed Get
// and List helpers, Snapshot, SyncedVersions) and registers handlers. Objects handed out are shared and must be
// treated as read-only; proto.Clone one before changing it.
//
// Handlers run on the writer's goroutine after the cache's data lock is released, one event at a time, in the order
// the changes were applied, so a handler sees an object's events in order and may read the cache. A handler must be
// quick (put a key on a work queue) and must not write to the cache or register handlers.
package cache
