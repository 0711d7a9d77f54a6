// Package hubobject owns what the agent's controllers of core objects on the hub (BackupBuckets, BackupEntries,
// Bastions) share in writing those objects.
//
// A Client writes the objects of one kind: it updates an object with a change function, re-reading it after a
// conflict (Update, AddFinalizer, RemoveFinalizer), applies JSON merge patches to its status (PatchStatus, Report),
// and remembers the hub's answers to these writes until the agent's cache has caught up with them (Pick), so that a
// decision made right after a write sees it. Objects are known by the agent cache's key (Key, SplitKey).
//
// Outcome is Gardener's lastOperation and lastError of an operation on such an object (Processing, Succeeded,
// Failed), with the error codes the extensions report (ErrorOf, ExtensionLastError).
package hubobject
