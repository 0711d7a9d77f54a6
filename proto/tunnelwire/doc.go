// Package tunnelwire owns how a tunnel's bytes move between a connection and the frames of an agent link Tunnel call
// (trellis.agent.v1 TunnelFrame), the same at both ends, the hub and the agent: the frame size, the frames' pooled
// buffers (given back with Release), a copy that holds no buffer while its source is idle, the gRPC buffer pool of the
// agent link's connections and their TLS credentials that write each transport flush in one system call
// (BatchRecords). docs/tunnels.md describes the tunnels; docs/benchmarks.md what these choices measure.
package tunnelwire
