// Package hubtest starts a real hub for tests: in-process, on a loopback TCP port with TLS, backed by an embedded etcd
// in a temporary directory, and hands out REST and gRPC clients that trust its CA and carry its admin token.
package hubtest
