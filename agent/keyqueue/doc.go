// Package keyqueue owns the work loop the agent's controllers share: a rate-limited queue of the agent cache's
// object keys (client-go's workqueue), drained by workers that call the controller's sync function one key at a time.
//
// A sync returns an error to be retried with per-key exponential backoff, or the time after which to look at the key
// again (0: only when something changes). Keys are deduplicated while waiting, and a key is worked on by one worker
// at a time. Run returns when its context ends and the workers have finished their keys.
package keyqueue
