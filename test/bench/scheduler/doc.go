// Command scheduler is the shoot scheduler's benchmark: the hub's scheduler (package hub/scheduler) on a real store
// (embedded etcd in this process, on a fresh temporary data dir; no hub process), measured in three phases:
//
//	setup    a CloudProfile and -seeds Seeds (default 100: -regions regions of aws, 3 zones each, allocatable shoots
//	         -capacity, GardenletReady True; every tenth seed of a region tainted "dedicated"), then -n pending Shoots
//	         (default 10,000; regions round-robin, 10 % with a zonal control plane, 5 % tolerating the taint), created by 16
//	         goroutines before the scheduler starts
//	backlog  the scheduler starts (-workers, Gardener's concurrentSyncs, default 5; -strategy) and binds the backlog:
//	         shoots bound per second, and per shoot the time from the scheduler's start until a watch of the shoots
//	         saw its spec.seedName (p50/p99/max), with this process's CPU as % of one core
//	online   with the scheduler idle, -online more shoots (default 1,000) are created at -rate per second: create
//	         returned → bind seen on the watch (p50/p99/max)
//
// Then the distribution: shoots per seed (min, max, mean, standard deviation; per region), and checks that no seed
// holds more than its allocatable shoots, that only tolerating shoots are on tainted seeds, and that within a region
// the seeds differ by at most one shoot (least loaded first). Every scheduling decision also writes an Event
// (SchedulingSuccessful), as in Gardener, so each shoot costs two etcd writes.
//
// Run with `make bench-scheduler` (extra flags in BENCH_ARGS, e.g. BENCH_ARGS="-n 2000 -workers 10") from the
// repository root. It prints a table and writes JSON to -out (default bin/bench/scheduler.json). Every loop is bounded
// by -timeout; the exit code is 1 when a shoot was not bound or a check failed.
package main
