// Package extension owns the agent's side of Gardener's extension contract, shared by the agent's controllers
// (shoots, backup buckets and entries, bastions): writing extension objects with gardener.cloud/operation and a fresh
// gardener.cloud/timestamp (Deploy, Annotate), Gardener's readiness rule for them (CheckReady: no lastError, the
// generation observed, no operation annotation left, lastOperation Succeeded at or after the timestamp), waiting
// (WaitReady, WaitGone), deleting with confirmation.gardener.cloud/deletion (Destroy), migrating (Migrate), and the
// error codes extensions report (CodedError, Codes, HasNonRetryable).
//
// Waits poll the object through the client given, which should read from an informer cache. An extension that keeps
// reporting an error for longer than Client.ErrorThreshold, or reports a non-retryable code, ends the wait with its
// error as a flow.Permanent error.
package extension
