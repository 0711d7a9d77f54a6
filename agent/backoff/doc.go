// Package backoff owns the agent's reconnect delays: full-jitter exponential backoff ("Exponential Backoff And
// Jitter", AWS Architecture Blog) that starts over once a connection has stayed up for a quiet period.
//
// Full jitter spreads a fleet of agents that lost the hub at the same moment over the whole backoff window, so a hub
// restart is followed by a ramp of reconnects rather than a storm. A hub that is starting too many sessions refuses more
// with a retry delay of its own (RetryAfter), which the agent honours when it is the longer one (Backoff.Delay).
package backoff
