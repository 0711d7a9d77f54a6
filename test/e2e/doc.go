// Package e2e holds end-to-end tests that run the real binaries as subprocesses over real TCP on 127.0.0.1: they
// build what they run with `go build` (once per test binary, into a temporary directory), start it on temporary data
// directories, and may kill and restart it. Nothing here is imported by other packages.
package e2e
