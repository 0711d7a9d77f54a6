// Package agentlink owns the hub's side of the agent link: AgentService.Connect. It runs the bootstrap exchange
// (bootstrap token → CertificateSigningRequest → signed seed client certificate, the token consumed), the sessions of
// agents holding a seed client certificate (Hello, heartbeats, the seed's assignments from the seed graph through a
// bounded per-object coalescing queue, certificate rotation), the agents' liveness (presence keys in etcd bound to
// the replica's lease, the seed's Lease and GardenletReady written on transitions and at a bounded rate, never once
// per heartbeat), and the leader's seed lifecycle controller that turns GardenletReady Unknown after the monitor
// period and the seed's shoots' conditions Unknown after the shoot monitor period.
package agentlink
