// Package tracing owns Trellis's OpenTelemetry tracing: the process-wide setup (an OTLP gRPC exporter, parent-based
// ratio sampling, W3C trace context propagation; off by default) shared by the hub, the agent and extensions, and
// the carriers of a trace across Trellis's own boundaries: the traceparent of the agent link's assignments (Index,
// from the hub's store writes to the assignments it sends) and the trellis.dev/traceparent annotation the agent sets
// on the extension objects it writes in the seed.
package tracing
