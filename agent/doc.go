// Package agent is the seed agent (trellis-agent, the gardenlet's role): the client side of the agent link.
//
// An Agent dials out to the hub over one TLS connection. Without credentials it bootstraps: it makes a key and a CSR
// for the seed client certificate (CN "gardener.cloud:system:seed:<seed>", O "gardener.cloud:system:seeds"), sends it
// on AgentService.Connect authenticated with a bootstrap token, and stores the signed certificate, its key and the
// hub's CA as a kubeconfig in a Secret of its seed (Gardener: garden/gardenlet-kubeconfig). With credentials it opens
// a session over mutual TLS: Hello with the versions it holds, heartbeats carrying the seed's health, and the
// assignments of its seed, which it applies to its local cache (package agent/cache) and acknowledges. After the
// first Welcome it registers its Seed from the configuration through the hub's SeedService.
//
// The client certificate rotates over the live session at a random 70–90 % of its lifetime, or when the hub sends
// RenewCertificate; new connections present the new certificate at once (tls.Config.GetClientCertificate), and the
// session reconnects to use it — the process keeps running. Lost connections are retried with full-jitter
// exponential backoff (agent/backoff); a session whose heartbeats go unacknowledged for three intervals is dropped.
//
// Besides the link, Run runs the seed side (controllers.go): the seed-side controllers are built before the agent
// connects, and one that cannot be built makes Run return its error; they run once the first session is up. Run
// returns only after every goroutine it started has ended.
//
// Files: agent.go (Config, New, Run, observation), controllers.go (the seed side), dial.go (TLS and gRPC options),
// bootstrap.go, session.go (one mTLS session: hello, receive loop, heartbeats), rotation.go, register.go (the Seed),
// health.go (seed health).
package agent
