// Package hub assembles one hub replica: it opens the store (embedded or external etcd), loads the PKI and the
// authenticator, registers every kind's typed service, and serves gRPC and the REST gateway on one TLS port (gRPC
// requests are told apart by their content type, as etcd does on TLS listeners), plus /healthz, /readyz and /metrics.
// New(Config) + Run(ctx) is the whole life cycle.
package hub
