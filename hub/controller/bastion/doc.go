// Package bastion owns the controller-manager's Bastion controller (Gardener's): it deletes a Bastion when its
// Shoot is gone or being deleted, when the Shoot was moved to another seed (bastions are not migrated), when the
// Bastion's status.expirationTimestamp has passed, and at the latest when it has existed for maxLifetime (default
// 24h) whatever its expiration says; otherwise it looks again when the sooner of the two comes. The agent of the
// Bastion's seed removes the extension Bastion and then its finalizer.
package bastion
