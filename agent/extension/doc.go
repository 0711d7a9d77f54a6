// Package extension owns the agent's side of Gardener's extension contract, shared by the agent's controllers
// (shoots, backup buckets and entries, bastions): writing extension objects with gardener.cloud/operation and a fresh
// gardener.cloud/timestamp (Deploy, Annotate), Gardener's readiness rule for them (CheckReady: no lastError, the
// generation observed, no operation annotation left, lastOperation Succeeded at or after the timestamp), waiting
// (WaitReady, WaitGone), deleting with confirmation.gardener.cloud/deletion (Destroy), migrating (Migrate), and the
// error codes extensions report (CodedError, Codes, HasNonRetryable).
//
// For the controllers that keep one extension object per core object (backup buckets and entries, bastions) it also
// says when an existing object is to be requested again (Rerequest: the extension took the last request, see
// RequestedAt, but reported no lastOperation within PickupTimeout, or the last operation Failed), which failed writes
// raced the extension or the informer (Raced), and how the hub's JSON fields become the object's and compare
// (RawExtension, SameJSON).
//
// Waits poll the object through the client given, which should read from an informer cache. An extension that keeps
// reporting an error for longer than Client.ErrorThreshold, or reports a non-retryable code, ends the wait with its
// error as a flow.Permanent error.
package extension
