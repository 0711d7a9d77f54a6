// Package hub assembles one hub replica from its parts, each built from what it needs (parts.go, servers.go): the
// store (embedded or external etcd), the PKI, the API (the kinds' registry with the admission plugin table, the
// projects' quotas and the authorizer), the authenticator, the agent link, the leader's loops (CSR approval, seed
// lifecycle, controller-manager) and the scheduler, and the servers: gRPC and the REST gateway on one TLS port (gRPC
// requests are told apart by their content type, as etcd does on TLS listeners), plus /healthz, /readyz, /metrics and
// the other HTTP handlers mounted in one place (Hub.handlers), and optionally a gRPC-only port for agents.
// New(Config) + Run(ctx) is the whole life cycle; nothing is set on a part after it is built, and every goroutine Run
// starts has ended when it returns.
package hub
