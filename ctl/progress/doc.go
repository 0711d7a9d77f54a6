// Package progress owns the live view of a Gardener operation on an object (a shoot's create, reconcile, hibernation,
// delete, ...): it reads status.lastOperation (type, state, percent, description: the current step) and
// status.lastErrors from the object's JSON, decides when the operation has ended, and renders it: on a terminal as
// one block redrawn in place with a progress bar, elsewhere as a line per change.
package progress
