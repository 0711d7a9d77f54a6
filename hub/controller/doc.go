// Package controller owns the framework the hub's leader-only control loops are built on, in the spirit of
// controller-runtime's, over the hub's own store instead of a Kubernetes API: a rate-limited work queue of object keys
// (client-go's delaying and rate-limiting queues around the hub's own queue, which lets go of a burst's memory), fed
// by watches of store collections that map each change to the keys it concerns, a periodic resync, and workers
// calling a one-method Reconciler.
//
// Sources. A Source watches one collection from its current state on (every existing object arrives as an ADDED
// event first) and resumes from the last revision it saw when the watch ends; when the history no longer covers that
// revision it starts over and enqueues everything it knew of. For every change it enqueues the keys Map gives for the
// new state together with the keys it gave for the previous state of the same object, so an object that stops
// concerning a key (a shoot moving away from a seed) still enqueues that key once. A Digest, when set, summarises
// what of an object matters to the controller: a change that leaves the digest and the keys as they were enqueues
// nothing, so routine status writes (heartbeats, conditions) cost nothing.
//
// Reconcilers. A key is worked on by one worker at a time. A Reconciler returns an error to be retried with
// per-key exponential backoff (Config.RetryMin to RetryMax), or a Result asking to look again after a while. Keys are
// deduplicated while waiting, so a burst of changes costs one reconciliation.
//
// Lane. Controllers whose Run context carries a Lane (WithLane) share its seats and its rate of store writes: the hub
// runs its scheduler and controller-manager in one lane, a bounded share beside its API, as API Priority and
// Fairness and client-go's rate limits bound Gardener's controllers.
//
// Events. Recorder writes Kubernetes Events, aggregating repetitions into a count; with Coalesce it writes one
// event at most once per window and counts the repetitions in between in memory.
//
// Time. Every wait (backoff, requeue after, resync) uses Config.Clock, so tests drive controllers with a fake clock
// (k8s.io/utils/clock/testing).
//
// Goroutines. Run starts one goroutine per source, Config.Workers workers and, with a resync period, a resync loop;
// it returns when its context ends and all of them have stopped.
package controller
