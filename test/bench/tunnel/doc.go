// Package tunnel is the tunnel benchmark (make bench-tunnel): request latency through the hub's seed API route and
// through the SNI passthrough against direct, throughput of a 100 MB stream through a passthrough tunnel against
// direct, the memory of idle tunnels and of watches, and 1,000 watches through 100 agents against direct. It runs as
// tests (TestTunnelBench, TestTunnelProcessBench, TestTunnelAgentsBench, TestTunnelReplicaBench and
// TestTunnelSplitBench, the last with the stream's ends in a second process started from the test binary; only with
// TRELLIS_BENCH=1) because it
// starts its parts with the test harness (test/agenttest): a real hub, real agents, real seed kube-apiservers and a
// TLS server standing in for a shoot's kube-apiserver. It reports numbers; it asserts only that every watch receives
// its events.
package tunnel
