// Package agentsim is a simulated seed agent: the agent link's protocol (bootstrap, Hello with resume versions,
// heartbeats, assignments, SyncComplete, acks, rotation) without a seed cluster behind it. It is light enough to run
// thousands in one process, for the hub's agent link tests, the fault tests and the load generator in test/bench.
// It is a test double for the agent only; the hub it talks to is always real.
package agentsim
