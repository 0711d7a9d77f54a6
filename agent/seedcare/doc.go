// Package seedcare owns the agent's seed care controller: the Seed condition gardenlet's seed care maintains,
// computed in the seed and written to the Seed's status on the hub. ExtensionsReady and BackupBucketsReady are the
// hub's (its controller-manager's seed checks, hub/controller/seed), as in Gardener.
//
// Every SyncPeriod (default 30 s), and at once when a ControllerInstallation of the seed changes (its extension's
// namespace comes or goes), it computes:
//
//   - SeedSystemComponentsHealthy: every extension CRD the agent installs is Established in the seed, and every
//     extension deployed into the seed (namespaces extension-*, not being deleted) renews its heartbeat Lease
//     gardener-extension-heartbeat (renewTime younger than StaleHeartbeatThreshold). Reasons SystemComponentsRunning,
//     CRDsNotEstablished, ExtensionHeartbeatsStale.
//
// As with Gardener's condition thresholds, a failing check first turns its condition Progressing and only after the
// condition's threshold (default 1 min) False; a passing check turns it True. Conditions are written only when their
// status, reason or message changes, with an update of the Seed's status that keeps every other condition: the
// hub owns GardenletReady. In place of Gardener's ManagedResource health (a Trellis seed runs no
// gardener-resource-manager), SeedSystemComponentsHealthy looks at the CRDs and heartbeats.
//
// With the conditions it writes what the gardenlet's seed reconciler reports about itself and its seed: gardener (the
// agent's id, name and version, Config.Identity), kubernetesVersion (the seed cluster's gitVersion, Config.Versions),
// clusterIdentity (once, when empty: the seed's ConfigMap kube-system/cluster-identity, else the UID of namespace
// kube-system) and observedGeneration (the generation of the Seed in the agent's cache; a change of the Seed
// triggers a sync) with, when it moves, lastOperation as gardenlet's seed reconciler leaves it (Reconcile, Succeeded,
// 100 %, "Seed cluster has been successfully reconciled."). The hub's fields (GardenletReady,
// clientCertificateExpirationTimestamp) are left alone.
package seedcare
