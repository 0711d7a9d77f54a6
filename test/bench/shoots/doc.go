// Command shoots is the seed side's load generator: it runs a local landscape of real binaries (package
// test/landscape: trellis-hub on embedded etcd, per seed a localseed with its kube-apiserver, a trellis-agent and
// provider-local, all on loopback) and drives shoots through their lives the way test/e2e's TestShootLifecycle does
// one, measured against DESIGN.md's budget "shoot create → Succeeded with provider-local < 10 s".
//
// It applies the example resources except the example shoot (project local, cloud profile, credentials), waits until
// every Seed reports ExtensionsReady (the hub's seed check: provider-local's ControllerInstallation is valid,
// installed and healthy), and then, with the example shoot under distinct names and DNS domains,
// placed by the hub's scheduler:
//
//	idle     measures the landscape at rest for -idle (heartbeats, leases, the seed's own controllers)
//	solo     one shoot alone (-solo): create, update and delete, the uncontended latencies the budget is about
//	create   POSTs -n shoots, -parallel at a time (default all at once), and times per shoot POST sent → its
//	         lastOperation Succeeded with status.observedGeneration == metadata.generation
//	update   PATCHes every shoot's worker pool (maximum + 1), -parallel at a time, and times PATCH sent → Succeeded
//	         at the new generation
//	delete   annotates every shoot confirmation.gardener.cloud/deletion=true and DELETEs it, and times annotation
//	         sent → the DELETED event; a GET must then answer 404
//
// Each phase reports p50/p90/p99/max of the per-shoot latencies, the time until the last shoot got there, the API
// calls' own latencies, and, per process, the CPU seconds used in the phase and the peak RSS sampled every -sample
// (default 500 ms) from /proc (package test/bench/procstat): the hub, each agent, each provider-local and each seed
// (localseed with its etcd, kube-apiserver and kube-controller-manager, summed), this load generator, and what
// other processes on the machine took. Shoot states come from one watch of the shoots collection (list, then watch
// from the list's resourceVersion with bookmarks; resumed after a broken stream, listed again after 410 Expired), so
// a latency ends when the event arrives, not at the next poll.
//
// To tell where the time goes, each phase also reports, from the same watch, sent → the shoot had a seed (create)
// and sent → the agent reported the operation Processing (waiting for one of the agent's -concurrent-syncs workers)
// apart from Processing → done (the flow); the requests the seeds' kube-apiservers served (apiserver_request_total,
// all clients); and the agents' slowest flow tasks, from their debug logs (-agent-log-level debug, the default).
//
// The binaries are built with `go build` into a temporary directory (go's build cache makes that quick when nothing
// changed), or taken from -bin-dir (trellis-hub, trellis-agent, provider-local, localseed); etcd, kube-apiserver and
// kube-controller-manager come from -testbin-dir (default $KUBEBUILDER_ASSETS, else bin/testbin; `make testbin`). The
// landscape lives in a temporary directory that is removed afterwards unless -keep or the run failed; on exit,
// Ctrl-C or SIGTERM the landscape is stopped (its processes also die with this one: parent-death signal).
//
// It prints a table and writes the results as JSON (-out, default bin/bench/shoots-<n>.json). The exit code is 1 when
// a shoot did not get where it should within -phase-timeout or the landscape failed.
//
// Run with `make bench-shoots N=50` from the repository root; extra flags go in BENCH_ARGS, e.g.
// `make bench-shoots N=20 BENCH_ARGS="-seeds 2 -concurrent-syncs 20"`.
package main
