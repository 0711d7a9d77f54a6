// Package scheduler owns the hub's shoot scheduler, Gardener's gardener-scheduler on the hub's controller framework:
// it binds every shoot that waits for a seed (no spec.seedName, spec.schedulerName unset or default-scheduler, not
// being deleted) to the seed Gardener's rules pick, and runs in the hub's leader only.
//
// Decision (DetermineSeed, pure and table-tested). In Gardener's order, each step keeping the seeds that pass and
// failing with Gardener's message when none does:
//
//  1. usable seeds: not being deleted, spec.settings.scheduling.visible, GardenletReady True, and BackupBucketsReady
//     True when the seed has spec.backup;
//  2. the seed selector of the shoot's CloudProfile (or NamespacedCloudProfile: its status.cloudProfileSpec);
//  3. the shoot's spec.seedSelector;
//  4. the provider type: the shoot's, or those the cloud profile's seedSelector.providerTypes lists ("*": any);
//  5. at least three zones for a control plane with failure tolerance zone;
//  6. the shoot's access restrictions are all offered by the seed;
//  7. candidates: networks disjoint from the seed's (with the seed's shootDefaults for unset pods and services) and
//     from the VPN's reserved ranges, every seed taint tolerated, and room left below status.allocatable.shoots;
//  8. the strategy: purpose testing takes any seed of the provider type; SameRegion (the default) the shoot's
//     provider type and region; MinimalDistance the nearest regions by the region ConfigMap in namespace garden
//     (label scheduling.gardener.cloud/purpose=region-config, annotation scheduling.gardener.cloud/cloudprofiles),
//     falling back to Gardener's Levenshtein distance of region names;
//  9. the seed with the fewest shoots (spec.seedName, and status.seedName when it differs), the first by name among
//     equals.
//
// Differences from Gardener, and why. A usable seed need not have status.lastOperation: Trellis seeds have no seed
// flow that would write one (the agent registers the seed and reports GardenletReady). Gardener's newer zone
// selection (spec.controlPlane zones, the seed's zoneSelection mode), default-domain matching and the emergency stop
// of shoot reconciliations are not steps here: the issue asks for the steps above, and Shoot has no control-plane zones
// field yet. An empty seed network intersects nothing (Gardener's seeds always have pods and services; a Trellis seed
// written straight to the store may not).
//
// Bind. The decision is written as the shoots/binding subresource writes it: spec.seedName alone, on the shoot's
// current state, only while it is the same shoot (uid), still waits, has the spec the decision was made for
// (generation), and the seed exists and is not being deleted; otherwise the reconciliation decides again. Success is
// an event SchedulingSuccessful ("Scheduled to seed '<seed>'"); failure an event SchedulingFailed and
// status.lastOperation {type Create, state Pending, description "Failed to schedule Shoot: <reason>"}, then a retry
// with exponential backoff.
//
// Load and concurrency. The shoots per seed and the waiting shoots are kept from one list and watch of all shoots
// (usage), so a decision costs O(seeds). A worker reserves a place on the seed it chose before binding; the other
// workers count the reservation, so the fewest-shoots choice and the capacity hold exactly with any number of
// workers (in Gardener concurrent workers may both take a seed's last place).
//
// Retries. Besides the backoff, every waiting shoot is tried again at once when something may have made it
// schedulable: a seed's labels, spec, readiness, deletion or allocatable shoots changed, a seed lost a shoot (room
// again), a cloud profile's seed selector or a region ConfigMap changed.
//
// Events are written off the workers' path, as client-go's recorder does in Gardener: a bounded queue drained by
// Config.Workers writers; a full queue makes the worker wait (events are not dropped).
//
// Goroutines. Run starts the usage watch, the event writers and two controllers (Config.Workers scheduling workers,
// one landscape worker) and returns when its context ends and all have stopped.
package scheduler
