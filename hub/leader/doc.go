// Package leader elects one hub replica as the leader through etcd (the concurrency package's election on a session
// lease) and runs the leader-only work — controllers, the scheduler — in it alone: the work starts when the replica
// wins and its context is cancelled the moment the replica's session lease is lost, before another replica can win.
package leader
