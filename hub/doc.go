// Package hub assembles one hub replica: it opens the store (embedded or external etcd), loads the PKI and the
// authenticator, registers every kind's typed service, and serves gRPC and the REST gateway on one TLS port (split by
// cmux, as etcd does), plus /healthz, /readyz and /metrics. New(Config) + Run(ctx) is the whole life cycle.
package hub
