// Package controller owns the shape every cache-driven controller of the agent's seed side shares: what it is given
// (Base: the seed's name, the agent's cache of the hub's assignments, the hub and seed connections, workers, retry
// bounds, the hub call timeout, the clock) and how it runs (Controller: watches of cache resources that map changed
// objects to keys, a key queue drained by workers with per-key backoff (package agent/keyqueue), and loops beside
// them).
//
// The controllers of a core kind on the hub that an extension object in the seed mirrors (BackupBucket, BackupEntry,
// Bastion) also share Mirror: the writers of the core objects and of the extension objects, and their defaults.
//
// A controller of a kind keeps only what is its own: its sync function, which keys its watches enqueue, what it
// forgets when an object goes, and its defaults. Run waits for the cache's first sync, registers the watches (each
// first sees the objects already cached), works until its context ends, and returns only after every goroutine it
// started has returned and the watches are removed.
package controller
