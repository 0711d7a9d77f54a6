// Package e2e holds end-to-end tests that run the real binaries as subprocesses over real TCP on 127.0.0.1: they
// build what they run with `go build` (once per test binary, into a temporary directory), start it on temporary data
// directories, and may kill and restart it. Nothing here is imported by other packages.
//
// Every test runs beside the others from the package's start, bounded by kind rather than by go test's -parallel
// (TestMain sets it far above the number of tests unless the command line gives one; main_test.go): the long node
// tests (a landscape or shoots on local nodes) call t.Parallel and take a machine-wide turn (localnode.TakeTurn)
// once they have built what they run; every other test (the kubectl and SIGKILL tests, the landscapes without nodes,
// the fleets of agents) calls lightTest, one at a time in the package. Each keeps to its own hub, data directories,
// free ports and node slots (test/localnode reserves a slot per node). A new test does one of the two.
package e2e
