// Package backupentry owns the agent's BackupEntry controller: gardenlet's backupentry controller, for the core
// BackupEntries (one per shoot, named <technical ID>--<shoot UID>, in the shoot's project namespace) assigned to the
// agent's seed.
//
// Reconcile, when spec.seedName is this seed. The controller keeps the finalizer "gardener" on the core entry, waits
// until the entry's BackupBucket is ready (lastOperation Succeeded, no lastError, generation observed), copies the
// bucket's generated secret (or its credentials before it has one) into the seed as garden/entry-<name>, and writes
// the cluster-scoped extension BackupEntry of the same name (type, region and providerConfig of the bucket,
// bucketName, secretRef, backupBucketProviderStatus = the bucket's providerStatus) with
// gardener.cloud/operation=reconcile and gardener.cloud/timestamp when it is missing, its spec or secret changed, or
// its last operation Failed. It looks at the extension object every PollInterval until it is ready under Gardener's
// rule and reports on the core entry: lastOperation Processing / Error (with the extension's lastError and codes) /
// Succeeded, observedGeneration, and status.seedName = this seed.
//
// Migration, when status.seedName is this seed and spec.seedName moved to another seed (the shoot's control plane
// moved). The extension object is annotated migrate; once the extension reports Migrate Succeeded (it removed its
// finalizer) the object is deleted, the seed's copy of the secret too, and the core entry's status says Migrate
// Succeeded with status.seedName cleared. The destination's agent waits for that, then restores: it writes the
// extension object with gardener.cloud/operation=wait-for-state, puts the state the shoot's ShootState keeps for the
// entry (kind BackupEntry, its name) into status.state, and annotates it restore. A restore also runs when the core
// entry is annotated gardener.cloud/operation=restore (the annotation goes once it succeeded).
//
// Deletion, once the core entry has a deletionTimestamp: the extension object is deleted (annotated
// confirmation.gardener.cloud/deletion=true first), and once the extension removed it the seed's secret goes, the
// status says Delete Succeeded and the finalizer is removed. Gardener's deletionGracePeriodHours is not implemented
// (deletion starts at once, as with Gardener's default of 0), nor is the forced restore on the destination when the
// source seed never migrates.
package backupentry
