// Package componentconfig owns the configuration of the hub's control-plane loops: one file holding Gardener's own
// component configuration documents, so an operator brings the files of gardener-controller-manager and
// gardener-scheduler as they are:
//
//   - controllermanager.config.gardener.cloud/v1alpha1 ControllerManagerConfiguration: the controllers' settings
//     (concurrentSyncs, sync periods, Bastion maxLifetime, project staleness and default quotas, event TTL, ...);
//   - scheduler.config.gardener.cloud/v1alpha1 SchedulerConfiguration: the shoot scheduler's strategy and workers.
//
// Either document may be missing; both get Gardener's defaults (SetDefaults_* of the two API packages), so the zero
// file behaves as Gardener's controller manager and scheduler do without one. Documents are decoded strictly: an
// unknown field, a wrong type or an unknown kind is an error naming the document and the field. Validate checks the
// values (positive workers and periods, known strategies, well-formed selectors).
//
// Settings of Gardener's processes that the hub owns itself are accepted and have no effect here, documented per
// field: client connections (the loops run in the hub's process, on its store), leader election (the hub elects a
// leader in etcd), servers, logging and debugging (the hub's own flags).
package componentconfig
