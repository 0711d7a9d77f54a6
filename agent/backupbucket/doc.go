// Package backupbucket owns the agent's BackupBucket controller: gardenlet's backupbucket controller and the part of
// its seed controller that creates the seed's bucket.
//
// The seed's bucket. When the agent's Seed has spec.backup, the controller makes sure the core BackupBucket named
// after the Seed's UID exists on the hub: spec.provider{type, region} from spec.backup (the region defaults to the
// Seed's), providerConfig and credentialsRef from spec.backup, spec.seedName the seed, owned by the Seed.
//
// Every bucket of the seed (spec.seedName). The controller keeps the finalizer "gardener" on the core bucket, copies
// its credentials secret (from the agent's cache) into the seed as garden/bucket-<name> with a
// gardener.cloud/timestamp of the last change of its data, and writes the cluster-scoped extension BackupBucket of
// the same name (type, region, providerConfig, secretRef) with gardener.cloud/operation=reconcile and
// gardener.cloud/timestamp when it is missing, its spec or credentials changed, or its last operation Failed. It then
// looks at the extension object every PollInterval until it is ready under Gardener's rule (no lastError, generation
// observed, annotation removed, lastOperation Succeeded and not older than the request) and reports on the core
// bucket's status: Processing while waiting, Error with the extension's lastError and codes, and on success the
// generatedSecretRef, providerStatus, observedGeneration and lastOperation Succeeded. The secret the extension
// generated (its status.generatedSecretRef) is copied to the hub as garden/generated-bucket-<name>, owned by the
// bucket, with the finalizer core.gardener.cloud/backupbucket.
//
// Deletion. Once the core bucket has a deletionTimestamp, the controller deletes the generated secret on the hub
// (and clears status.generatedSecretRef: the hub's seed authorizer answers reads of a missing secret with
// PermissionDenied), refreshes the credentials in the seed, deletes the extension object (annotated
// confirmation.gardener.cloud/deletion=true first), waits until the extension removed it, deletes the seed's copy of
// the credentials, reports Delete Succeeded and removes the finalizer.
//
// Differences from gardenlet: the extension object is polled, not watched; the finalizer gardenlet puts on the
// credentials secret in the garden is not set; the seed's bucket is not deleted with the Seed (the Seed's deletion
// flow does that) and the Seed's BackupBucketsReady condition is left to the hub.
package backupbucket
