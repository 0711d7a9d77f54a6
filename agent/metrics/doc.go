// Package metrics owns the agent process's shared Prometheus registry, Registry, which the agent's /metrics serves
// beside the agent's own metrics. The agent's packages register their metrics there (the flows' task durations, the
// Helm operations), and the package's initialization connects client-go to it, as controller-runtime's metrics
// package does for a manager, with the same names and labels:
//
//   - rest_client_requests_total{code,method,host}: every request of a client-go REST client in the process (the
//     seed client, the clients of shoots' API servers), by status code, method and host;
//   - workqueue_*{name,controller}: the depth, adds, latencies, unfinished work and retries of every named client-go
//     work queue (the controllers' queues, agent/keyqueue); depth also has controller-runtime's priority label,
//     empty.
//
// The agent does not import controller-runtime's metrics package: it links client-go's leader election, and with it
// every informer, lister and typed client of client-go.
package metrics
