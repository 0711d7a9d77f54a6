// Package shoot owns the Shoot controllers of the hub's controller-manager, Gardener's
// pkg/controllermanager/controller/shoot/{hibernation,maintenance,quota,retry,statuslabel,conditions} rebuilt on
// hub/controller over the hub's store. Each is its own controller.Controller with its own workers:
//
//   - hibernation (hibernation.go): sets spec.hibernation.enabled when a start or end cron schedule of
//     spec.hibernation.schedules fires in its time zone, records status.lastHibernationTriggerTime, and looks again
//     at the next scheduled time. Missed schedules are caught up within the trigger deadline.
//   - maintenance (maintenance.go, timewindow.go, versions.go): inside the shoot's maintenance time window, or at
//     once on gardener.cloud/operation=maintain, updates the Kubernetes version (control plane and worker pools) and
//     the machine image versions from the (Namespaced)CloudProfile when spec.maintenance.autoUpdate asks for it or
//     the version expired, records status.lastMaintenance, and asks the agent to reconcile the shoot.
//   - quota (quota.go): gives a shoot bound to a Quota with clusterLifetimeDays the expiration annotation
//     shoot.gardener.cloud/expiration-timestamp and deletes it once that time has passed.
//   - retry (retry.go): annotates gardener.cloud/operation=retry on a shoot that failed with
//     ERR_INFRA_RATE_LIMITS_EXCEEDED once the retry period has passed.
//   - status label (statuslabel.go): keeps the label shoot.gardener.cloud/status (healthy, progressing, unknown,
//     unhealthy) in line with the shoot's conditions, last operation and last errors.
//   - conditions (conditions.go): copies the conditions of the Seed a shoot is registered as (through a
//     ManagedSeed) into the shoot's status, next to the shoot's own conditions.
//   - addresses (addresses.go, Trellis's own; runs when the hub serves a tunnel listener): advertises the shoot's
//     kube-apiserver through the hub's tunnel listener as status.advertisedAddresses[name=external] of every
//     scheduled shoot, first in the list, and puts it back when a status write drops it; other addresses stay.
//
// Writes. Spec, labels and annotations go through Collection.Update or GuaranteedUpdate, status through UpdateStatus
// or GuaranteedUpdate with status=true. A spec change moves metadata.generation and the seed's agent reconciles the
// shoot; gardener.cloud/operation=reconcile and =retry are the agent's explicit triggers (agent/shoot/decide.go).
//
// Time. Every wait uses Config.Clock and every random choice Config.Rand, so tests drive the controllers with a
// fake clock and fixed randomness.
//
// Goroutines. Run runs every controller until its context ends and returns when all have stopped.
package shoot
