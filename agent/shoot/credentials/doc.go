// Package credentials owns a shoot's credentials in its namespace of the seed, as gardenlet's secrets manager does:
// the cluster CA ("ca"), the service account signing key ("service-account-key"), the etcd encryption key
// ("kube-apiserver-etcd-encryption-key") and, for shoots with workers and SSH access, the workers' SSH keypair
// ("ssh-keypair").
//
// Every credential is a Secret named <name>-<hash>, where the hash is taken from the time its last rotation was
// initiated (status.credentials.rotation.<x>.lastInitiationTime of the Shoot; none before the first rotation), and
// labelled name=<name>, managed-by=secrets-manager and last-rotation-initiation-time=<unix seconds>. The Shoot's
// status is therefore the whole rotation state: an agent that restarts in the middle of a rotation finds the secrets
// of the times the status names and neither loses nor duplicates a key. A new initiation time makes a new secret;
// the one before it is kept as the old credential while a two-phase rotation is Preparing or Prepared (the CA bundle,
// the service account key bundle and the etcd encryption configuration then hold both) and goes with Completing.
// The SSH keypair's rotation has one phase: the previous keypair stays as the old one until the next rotation.
//
// Ensure generates what is missing and returns the credentials in use; Cleanup deletes the secrets no longer in use,
// at the end of a successful flow. Export and Import carry the secrets through a ShootState for a control plane
// migration.
package credentials
