// Package timescale owns how long tests wait for work whose speed depends on the machine: a shoot's control plane
// coming up on a local node, a rollout, a page rendering in the browser, a fleet of agents converging. Every such
// limit a test sets goes through Scale, which multiplies it by the factor in TRELLIS_TEST_TIMEOUT_SCALE (a number
// ≥ 1; unset means 1), as Go's own test suite does for slow builders with GO_TEST_TIMEOUT_SCALE.
//
// The limits written in the tests are what a lone test needs on an idle fast machine, so that a developer running
// one sees a failure soon. `make test` runs every package at once beside the fuzz and race phases, and on a machine
// that takes twice the CPU for the same work a control plane's rollout took over three minutes under that load; it
// sets a factor (TEST_TIMEOUT_SCALE, 3 by default). A passing test never waits a limit out, so a larger factor only
// delays the report of a failure. Limits on the system's own behaviour (a heartbeat that must not be missed, a
// duration that is the thing under test) are not scaled.
package timescale
