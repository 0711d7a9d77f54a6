// Command api is the REST load generator of the hub: it starts bin/trellis-hub as a subprocess on a fresh temporary
// data dir and a free loopback port, measures the time from process start to /readyz 200, creates the objects a
// Shoot needs, and then drives realistic Shoots (8–10 KB of compact JSON, shaped like a defaulted Gardener AWS shoot)
// through the REST API with -c concurrent HTTP/2 clients, each on its own connection:
//
//	create  POST -n shoots
//	get     GET -n shoots picked at random
//	update  PUT every shoot with changed labels and its current resourceVersion (on 409 Conflict: GET and PUT again,
//	        as client-go's RetryOnConflict, counted in the phase's note)
//	patch   JSON merge patch of a label and an annotation of every shoot
//	list    -lists times the whole collection and -lists times with a label selector matching 10 %, first with gzip
//	        accepted (Go's transport asks for it and decompresses, as client-go and kubectl), then again without
//	        compression (phases list-all-plain, list-10%-plain); each list reports the bytes read from the connection;
//	        then -lists times the whole collection as kubectl get asks for it, a Table with gzip, in one answer
//	        (list-table) and in pages of 500 following the continue tokens, kubectl's default (list-table-500)
//	watch   one watcher on the collection from the resourceVersion after the creates: it first replays the updates,
//	        then -watch-updates PUTs carry a send timestamp annotation and the watcher measures sent → received
//	        by the first event of each timestamp (with -loops the loops' later writes of the shoot carry it too);
//	        they go as fast as the clients go (the watch under a saturating write load), or at -watch-rate PUTs/s
//	        (delivery without the queueing of an overloaded server)
//	delete  DELETE every shoot
//
// Each phase reports ops/s, p50, p99 and errors, with the hub's CPU time and RSS read from /proc; -out writes the
// same results as JSON. Budgets come from DESIGN.md (Budgets): the throughput ones are stated as 5× the
// kube-apiserver numbers recorded there, not measured in this run. Every loop is bounded by a count and a time limit,
// and nothing leaves 127.0.0.1. The hub is stopped (and its data dir removed unless -keep) on exit or interrupt.
//
// The hub runs with its scheduler and controllers off (--disable-scheduler, no controllers). Targets besides it, each
// phase run against every target in turn so that the machine's other load hits them alike, with a table of ratios at
// the end (ops/s, latencies, and the servers' CPU time per operation, which the machine's other load disturbs less;
// the watch has two rows: sent → received, which includes the PUT's own latency, and the delivery, event received −
// PUT answer received, which the 3 ms goal applies to):
//
//	-peer   kube-apiserver + etcd from -testbin (make testbin), started through envtest, serving a Shoot CRD
//	        (core.gardener.cloud/v1beta1, status subresource, a permissive schema: spec and status keep unknown
//	        fields, so the peer validates the least it can); etcd syncs to disk as the hub's does. The peer gets the
//	        same shoots; of the prerequisites only the namespace. make bench-api adds -peer when bin/testbin has
//	        both binaries.
//	-loops  a second hub with its scheduler and controller-manager on, three seeds that never become ready (no
//	        agent), so every shoot stays unschedulable; its ratio to the hub with its loops off is the loops' cost.
//	        -loops-flags "--loop-qps 50 ..." passes more flags to it (the lane's, to compare its settings).
//
// kube-apiserver's watch cache keeps fewer events than the hub's window, and the loops write the shoots besides the
// workload: those targets are watched from the last revision the workload saw, without the replay. -cpuprofile DIR
// saves CPU profiles of each hub during the write phases (create, update, patch, delete) from its
// /debug/pprof/profile, -profile-seconds long.
//
// The hubs run with --watch-window 2n + -watch-updates (at least 10,000, the default) so that the watch can resume
// from the revision after the creates.
//
// Run with `make bench-api BENCH_ARGS="-n 2000 -out /tmp/bench.json"` from the repository root (it needs
// bin/trellis-hub, which make bench-api builds first). The exit code is 1 when any operation failed.
package main
