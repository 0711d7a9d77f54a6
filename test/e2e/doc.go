// Package e2e holds end-to-end tests that run the real binaries as subprocesses over real TCP on 127.0.0.1: they
// build what they run with `go build` (once per test binary, into a temporary directory), start it on temporary data
// directories, and may kill and restart it. Nothing here is imported by other packages.
//
// The tests that start landscapes, nodes or fleets of agents call t.Parallel (go test runs -parallel of them at a
// time, GOMAXPROCS by default) after the short kubectl and SIGKILL tests: they spend most of their time waiting for
// processes, pods and machines, and each keeps to its own hub, data directories, free ports and node slots
// (test/localnode reserves a slot per node). A new test here does the same, or stays sequential.
package e2e
