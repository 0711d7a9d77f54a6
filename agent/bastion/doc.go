// Package bastion owns the agent's Bastion controller: gardenlet's bastion controller, for the Bastions
// (operations.gardener.cloud/v1alpha1) whose spec.seedName is the agent's seed.
//
// For each Bastion the controller keeps the finalizer "gardener" and writes the extension Bastion of the same name
// in the shoot's control-plane namespace (the Shoot's status.technicalID, or shoot--<project>--<name>): type
// spec.providerType or else the Shoot's provider type, userData a script that adds spec.sshPublicKey as the only
// authorized key of user gardener (base64 in JSON, as Gardener's), and ingress from spec.ingress. It is written with
// gardener.cloud/operation=reconcile and gardener.cloud/timestamp when it is missing, its spec changed or its last
// operation Failed. The controller looks at it every PollInterval until it is ready under Gardener's rule, then sets
// the Bastion's condition BastionReady=True (SuccessfullyReconciled), status.ingress from the extension's and
// status.observedGeneration; an error of the extension sets BastionReady=False (FailedReconciling).
//
// Once status.expirationTimestamp has passed the extension object is deleted and BastionReady turns False
// (Expired); the Bastion itself is the hub's to delete. A deleted Bastion (BastionReady False, DeletionInProgress)
// has its extension object deleted, with confirmation.gardener.cloud/force-deletion passed on when the Bastion
// carries it, and loses the finalizer once the extension removed the object.
package bastion
