// Command agents is the agent link's load generator: N simulated seed agents (test/agentsim) in this process,
// against a real hub in another process, over real TCP on loopback, measured against the budgets of DESIGN.md
// (Budgets, "connected agents per hub", "assignment latency", "reconnect storm").
//
// It starts bin/trellis-hub on a fresh data dir and a free loopback port (or uses the hub at -hub), then:
//
//	setup      creates a Project with its namespace, a CloudProfile, one Secret + SecretBinding shared by all
//	           shoots, N Seeds and one Shoot per Seed through the typed gRPC services (full admission), and N
//	           bootstrap tokens; bootstraps N agents (-bootstrap-concurrency at a time) and caches their keys and
//	           certificates in the data dir, so -reuse skips all of it on the next run
//	connect    runs the N agents (2 s heartbeats), their starts spread over -ramp, and times until every agent has
//	           received its first SyncComplete
//	steady     after the fleet has settled and the hub's own loops have worked off the fleet's arrival (the etcd
//	           revisions are the agent link's Lease writes alone; at most -loops-idle-max), measures for -window:
//	           the hub's RSS (VmRSS), its CPU (utime+stime) as % of one core, what it allocated per heartbeat, the
//	           heartbeat ack round trip seen by the agents, and the agent link's etcd writes
//	           (trellis_agentlink_etcd_writes_total; the etcd revision is read too, as a cross-check); per second,
//	           the acks' p99, the CPU of each process and which process completed a garbage collection. A
//	           collection's mark phase holds up the acks of the process that collects; the ack budget is checked
//	           without the seconds around this load generator's own collections, and the p99 without either
//	           process's is printed too
//	assign     updates -updates shoots (a label each) through ShootService.Update at -update-rate and times, per
//	           update, when Update returned (commit, with the new resourceVersion) → when the owning agent's
//	           OnAssignment saw that resourceVersion; also update sent → received, which cannot be negative
//	storm      stops the hub (SIGTERM, or SIGKILL with -kill9; -forget-tickets makes every reconnect a full TLS
//	           handshake), starts it again on the same data dir and port, and
//	           times until every agent has completed a new SyncComplete; reports how many resumed from their
//	           versions and checks that every agent holds the latest version of its Seed and Shoot
//
// With -replicas R (2–9) it runs, instead of one hub on its embedded etcd, a three-member etcd cluster with TLS
// (test/etcdcluster, bin/testbin/etcd) and R hub replicas on it (test/binproc.StartReplicas: shared encryption keys and
// admin token, a data dir each), on a fresh cluster every run. Every agent connection tries the replicas' gRPC-only
// addresses in a random order and takes the first that accepts a TCP connection (agent/hubdial.DialFirst), as agents
// whose hub address is a DNS name with an address per replica. After setup (through replica 0; bootstraps spread like sessions) and connect it
// measures each replica's RSS and CPU and the acks for -window, writes -updates shoot updates through the replicas in
// turn (most reach agents on another replica), then SIGKILLs one replica (-kill-replica: leader, follower or an
// index), updates the shoot of each of its agents through the survivors while they are away, and times until every
// one of those agents has synced again on a survivor; it reports the connections accepted, each survivor's sessions,
// RSS and CPU, the new leader, and checks through every survivor that each agent holds the latest Seed and Shoot.
// Results go to bin/bench/agents-<n>-replicas-<R>.json.
//
// Agents connect to the hub's gRPC-only listener (--grpc-listen, on a free port) unless -grpc-port=false, which
// makes them use the main port (gRPC through net/http's HTTP/2 server and grpc.Server.ServeHTTP).
//
// It prints a table and writes the results as JSON (-out, default bin/bench/agents-<N>.json). With -profile it also
// saves the hub's heap, goroutine and CPU profiles at steady state and CPU profiles of the first 30 s of the connect
// and of the storm next to the JSON; -bench-profile saves the load generator's own. The load generator shares the
// machine with the hub: the CPU it and other processes took in each phase is reported with the hub's, each measured
// phase first waits (-quiet-max) for other processes to go quiet, and a disturbed steady-state window is measured
// again (-steady-attempts). Connect and storm also report the machine's TCP accept and listen-drop counters, which
// show connection churn. A lock file keeps two runs off one data dir.
//
// Run with `make bench-agents N=10000` from the repository root (bin/trellis-hub is built first); extra flags go in
// BENCH_ARGS, e.g. `make bench-agents N=1000 BENCH_ARGS="-reuse -kill9"`.
package main
