// Command suite runs the tests of this module's packages as `go test -count=1 PACKAGES` does in package list mode,
// from test binaries kept per machine: make test's go test phase and its race run (`go run ./test/suite -p 3 -timeout
// 80m ./test/e2e ./test/shootcontrolplane ./...`).
//
// go test links every package's test binary anew on each run, even when Go has cached every package it is made of:
// about 4 CPU-seconds a binary here, 436 CPU-seconds for the module's 107 on a 2-core machine, every `make test`.
// suite builds them with `go test -c -o DIR/` into a directory of the machine's cache instead (-cache, or
// TRELLIS_TEST_CACHE; unset: "trellis/tests" under the user's cache directory; "off": a temporary directory removed
// at the end), where go test -c leaves a binary whose sources and flags are unchanged as it is and links only what
// changed: 6 s for all 107 when nothing did. A binary's directory depends only on its package's import path (and
// -race), so a clone of the same sources elsewhere (CI's fresh clone) finds the binaries another clone linked, with
// -trimpath in GOFLAGS as make test sets it. A lock file serializes runs that share the cache; a run that finds it held
// builds into a temporary directory of its own instead of waiting.
//
// The packages run in the order given; each starts as soon as its binary is built, and the binaries are built in that
// order too, a few packages per go test -c, so the first packages start while the rest are linked. At most -p programs
// run at once, as with go test -p: a go test -c (which links one binary at a time) takes a slot as a test binary does. Each runs in its package's directory with -test.count=1, -test.paniconexit0 and -test.timeout
// (-timeout), and is sent SIGQUIT a minute after its timeout if it has not ended, as go test does. A passing package
// prints "ok", its import path and its time; a failing one its whole output, then FAIL (a package whose test binary
// does not build: the compiler's output). suite exits 1 if any package failed. Arguments after "--" are passed to
// every test binary.
//
// Unlike go test, suite runs no go vet (go test -c runs it unless given -vet=off): make lint does (golangci-lint's
// govet, every analyzer go test runs and more), and CI runs it before make test.
package main
