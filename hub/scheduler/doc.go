// Package scheduler owns the hub's interim shoot placement: a leader-only loop that gives every Shoot without
// spec.seedName a seed, so that a shoot created without one gets reconciled.
//
// It is deliberately simple and stands in until the scheduler of issue 7 (Gardener's gardener-scheduler: seed and
// cloud profile selectors, taints and tolerations, capacity, zones, the SameRegion and MinimalDistance strategies,
// SchedulingSuccessful/SchedulingFailed events) replaces it. Its rules: a seed is a candidate when it is not being
// deleted and its GardenletReady condition is True; among candidates of the shoot's provider type (all candidates
// when none has it) it prefers the shoot's region, then the fewest shoots (spec.seedName or status.seedName), then
// the name. It writes spec.seedName with a compare-and-swap update of the shoot and nothing else.
package scheduler
