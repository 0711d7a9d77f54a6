// Package tunnel is the tunnel benchmark (make bench-tunnel): request latency through the hub's seed API route and
// through the SNI passthrough against direct, throughput of a 100 MB stream through a passthrough tunnel against
// direct, and the memory of idle tunnels. It runs as a test (TestTunnelBench, only with TRELLIS_BENCH=1) because it
// starts its parts with the test harness (test/agenttest): a real hub, a real agent, a real seed kube-apiserver and
// a TLS server standing in for a shoot's kube-apiserver. It reports numbers; it asserts none.
package tunnel
