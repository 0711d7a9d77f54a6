// Package garbagecollector owns the hub's garbage collector, kube-controller-manager's of the same name for the hub's
// kinds: an object whose metadata.ownerReferences all name owners that no longer exist (by name and uid) is deleted,
// in the background, and its own dependents follow it the same way; an object that keeps at least one owner loses
// the references to those that are gone. Gardener relies on this in the garden cluster for what gardenlet and its
// controllers write with owner references (the secrets a shoot publishes to its project, for one).
//
// Owners are looked up in the dependent's namespace, or cluster-wide for cluster-scoped kinds. A reference the hub
// cannot resolve (a kind it does not serve, or a namespaced owner of a cluster-scoped object) keeps the object, as
// Kubernetes does. Deletion propagation is background only: the hub has no foreground deletion or orphaning
// (propagationPolicy), so blockOwnerDeletion has no effect.
package garbagecollector
