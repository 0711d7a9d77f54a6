// Package heartbeat owns the extension's heartbeat: the Lease gardener-extension-heartbeat in the extension's
// namespace, renewed every RenewInterval (default 30 s) with holderIdentity = the extension's name,
// leaseDurationSeconds = the interval and renewTime = now. The agent reads renewTime during its shoot health checks
// and reports the extension's health conditions as outdated when it is too old.
//
// A Heartbeat is a controller-runtime Runnable (Add registers one with a manager); like Gardener's heartbeat
// controller it runs only in the leader, the replica that reconciles.
package heartbeat
