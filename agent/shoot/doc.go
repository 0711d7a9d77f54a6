// Package shoot owns the agent's shoot controller: the gardenlet's shoot flows, run in the seed for every Shoot the
// hub assigns to the agent's seed.
//
// The controller watches the Shoots in the agent's cache (package agent/cache) and decides per Shoot, with Gardener's
// rules (decide.go), which flow to run:
//
//   - reconcile (lastOperation type Create, Reconcile or Restore) when spec.seedName is this seed: on create, when the
//     generation moved, after an Error (with backoff), when the shoot carries gardener.cloud/operation=reconcile or
//     retry or a credentials rotation (rotation.go), when the sync period passed since the last success, and to
//     finish an operation a crash interrupted;
//   - delete when deletionTimestamp is set;
//   - migrate when spec.seedName moved to another seed while status.seedName is still this seed; the destination's
//     agent then restores (reconcile with type Restore) from the ShootState the migration saved.
//
// Flows are DAGs (package agent/flow) of Gardener's steps, in Gardener's order: namespace shoot--<project>--<name>,
// cloud provider secret, Cluster, Infrastructure, DNSRecords, BackupEntry, Extensions BeforeKubeAPIServer, etcd
// and ControlPlane, kube-apiserver, kube-controller-manager and kube-scheduler (controlplane.go, on seeds that run
// pods; images from package agent/shoot/imagevector), with workers kube-proxy and CoreDNS in the shoot
// (systemcomponents.go), Extensions AfterKubeAPIServer, OperatingSystemConfigs, Network, Worker, Extensions AfterWorker,
// ContainerRuntimes (reconcile.go); the reverse for delete (delete.go); migrate and restore in migrate.go. The
// shoot's credentials are kept by package agent/shoot/credentials (secrets.go) and published in the project
// namespace as gardenlet does (garden.go); the rotation phases go into the status when a flow starts and when it
// succeeds (rotation.go). Each
// extension object is written with gardener.cloud/operation=reconcile (or migrate / wait-for-state / restore) and
// gardener.cloud/timestamp and is ready only under Gardener's rule (package agent/extension). Progress, errors with
// their codes, observedGeneration and the shoot's conditions (care.go, with the agent's own probes of the control
// plane in health.go) go to the hub as status patches (status.go).
//
// Beside the flows, the node gate (nodegate.go) takes Gardener's critical-components taint off the Nodes of shoots
// with workers whose control plane runs here once each node's critical components (kube-proxy) are ready.
//
// Every step is idempotent and keyed by name, so a flow interrupted by a crash is simply run again: the Shoot's
// lastOperation is still Processing, and the restarted agent resumes the same operation.
package shoot
