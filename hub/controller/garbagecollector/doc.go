// Package garbagecollector owns the hub's garbage collector, kube-controller-manager's of the same name for the hub's
// kinds: an object whose metadata.ownerReferences all name owners that no longer exist (by name and uid) is deleted,
// in the background, and its own dependents follow it the same way; an object that keeps at least one owner loses
// the references to those that are gone. Gardener relies on this in the garden cluster for what gardenlet and its
// controllers write with owner references (the secrets a shoot publishes to its project, for one).
//
// Owners are looked up in the dependent's namespace, or cluster-wide for cluster-scoped kinds. A reference the hub
// cannot resolve (a kind it does not serve, or a namespaced owner of a cluster-scoped object) keeps the object, as
// Kubernetes does.
//
// Deletion propagation is Kubernetes': an object deleted with propagationPolicy Orphan carries the orphan finalizer
// until the collector has removed the references of its dependents to it; one deleted with Foreground carries
// foregroundDeletion, its dependents are deleted (in the foreground themselves when they have dependents, or lose
// the reference when another owner remains), and the finalizer goes once no dependent with blockOwnerDeletion is
// left. Background (the default) deletes the owner at once and its dependents after it.
package garbagecollector
