// Package tracingtest is an in-process OTLP trace receiver for tests: a gRPC collector service on loopback that keeps
// every span exported to it, with the exporting process's service.name and the span's instrumentation scope, so a
// test can check that one operation is one trace across the hub, the agent and extensions.
package tracingtest
