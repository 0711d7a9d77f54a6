// Package controllertest is the test support that the tests of the hub's controllers (hub/controller/... and
// hub/scheduler) share, and only that: the hub's registry of kinds on a real store (embedded etcd), its collections
// by group and resource, reads and writes of objects that fail the test on error, the Events about an object,
// running controllers in the background for the length of a test (Start), and the waits for them (Eventually,
// Consistently, StepUntil on a fake clock).
//
// Fixtures of one package (its shoots, seeds, projects, reconcilers) stay with that package's tests. The package
// imports hub/api and hub/store, never hub/controller, so that the controller package's own tests can use it.
package controllertest
