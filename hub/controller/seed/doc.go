// Package seed owns the controller-manager's Seed controllers, as Gardener's:
//
//   - secrets: every Seed gets its namespace seed-<name> in the garden (label gardener.cloud/role=seed, owned by
//     the Seed), holding copies of the garden's shared Secrets (namespace garden, label gardener.cloud/role: the
//     internal and default domains, alerting, ...); copies of Secrets that are gone or unlabelled are deleted, and
//     the namespace and its copies go with the Seed;
//   - backup buckets check: the Seed's condition BackupBucketsReady from the BackupBuckets placed on it: True
//     (BackupBucketsAvailable) when there are some and none reports a lastError; a failing bucket turns it
//     Progressing and, after the threshold, False (BackupBucketsError, listing the buckets); once its buckets are
//     gone it turns Progressing, then Unknown (BackupBucketsGone). A seed that never had a bucket (no spec.backup)
//     gets no condition, as in Gardener, whose check only looks at the seeds of buckets;
//   - extensions check: the Seed's condition ExtensionsReady from its ControllerInstallations' Valid, Installed,
//     Healthy and Progressing conditions: True (AllExtensionsReady), or Progressing and after the threshold False with
//     NotAllExtensionsValid, NotAllExtensionsInstalled, NotAllExtensionsHealthy or SomeExtensionsProgressing.
//
// The checks run every syncPeriod (default 30 s) and at once when a bucket or installation of the seed changes; the
// thresholds come from conditionThresholds (none: False at once, as Gardener). Conditions are written to the Seed's
// status only when their status, reason or message change, keeping every other condition.
package seed
