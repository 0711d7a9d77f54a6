// Command api is the REST load generator of the hub: it starts bin/trellis-hub as a subprocess on a fresh temporary
// data dir and a free loopback port, measures the time from process start to /readyz 200, creates the objects a
// Shoot needs, and then drives realistic Shoots (8–10 KB of compact JSON, shaped like a defaulted Gardener AWS shoot)
// through the REST API with -c concurrent HTTP/2 clients, each on its own connection:
//
//	create  POST -n shoots
//	get     GET -n shoots picked at random
//	update  PUT every shoot with changed labels and its current resourceVersion
//	list    -lists times the whole collection and -lists times with a label selector matching 10 %
//	watch   one watcher on the collection from the resourceVersion after the creates: it first replays the updates,
//	        then -watch-updates PUTs carry a send timestamp annotation and the watcher measures sent → received
//	delete  DELETE every shoot
//
// Each phase reports ops/s, p50, p99 and errors, with the hub's CPU time and RSS read from /proc; -out writes the
// same results as JSON. Budgets come from DESIGN.md (Budgets): the throughput ones are stated as 5× the
// kube-apiserver numbers recorded there, not measured in this run. Every loop is bounded by a count and a time limit,
// and nothing leaves 127.0.0.1. The hub is stopped (and its data dir removed unless -keep) on exit or interrupt.
//
// With -n above the hub's --watch-window (10,000 events by default) the watch cannot resume from the revision after
// the creates and the hub answers 410 Expired, as Kubernetes would; the run then reports the watch phase as failed.
//
// Run with `make bench-api BENCH_ARGS="-n 2000 -out /tmp/bench.json"` from the repository root (it needs
// bin/trellis-hub, which make bench-api builds first). The exit code is 1 when any operation failed.
package main
