// Package protection owns the controller-manager's finalizer controllers that keep the garden's referenced objects
// from going while they are used, as Gardener's do:
//
//   - CloudProfiles (finalizer "gardener"): while Shoots or NamespacedCloudProfiles reference them;
//   - NamespacedCloudProfiles ("gardener"): while Shoots of their namespace reference them;
//   - ExposureClasses ("gardener"): while Shoots name them in spec.exposureClassName;
//   - Quotas ("gardener"): while SecretBindings or CredentialsBindings list them;
//   - SecretBindings and CredentialsBindings ("gardener"): while Shoots of their namespace name them. Besides, the
//     Secret (or WorkloadIdentity) a binding references gets the finalizer "gardener.cloud/gardener", the label
//     reference.gardener.cloud/secretbinding (or .../credentialsbinding) and a label
//     provider.shoot.gardener.cloud/<type>=true per provider type, and its Quotas the reference label; all of these
//     are released once the last binding referencing them is gone;
//   - the objects a Shoot references (shoot reference protection): the Secrets of its DNS providers and its
//     spec.resources, the ConfigMap of its audit policy and its spec.resources ConfigMaps get the finalizer
//     "gardener.cloud/reference-protection" (Gardener-managed Secrets, labelled gardener.cloud/role, are left
//     alone), released when no Shoot of the namespace references them any more; the Shoot carries the same finalizer
//     while it protects anything.
//
// A deletion that waits records an Event ResourceReferenced on the object naming its users. Each controller is
// driven by its objects and by the objects that use them, so a deletion proceeds as soon as the last user goes.
//
// The shoot reference controller finds the protected Secrets and ConfigMaps of a namespace and whether any Shoot
// still references one through store indexes (Indexes, which the hub registers with its kinds), so a reconciliation
// costs a lookup per protected object, not a scan of the namespace's Shoots: with thousands of Shoots in one project
// namespace, all referencing the same DNS Secret, the scan made every reconciliation O(n).
package protection
