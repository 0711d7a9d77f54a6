// Package objectnames owns the names of garden objects that Gardener derives from other objects and that the hub and
// the agent must agree on: what gardenlet publishes of a shoot in its project namespace (<shoot>.ca-cluster,
// <shoot>.ssh-keypair, <shoot>.ssh-keypair.old), which the agent writes and the seed authorizer lets it write by
// name, and a shoot's BackupEntry (<technical ID>--<shoot UID>), which the agent creates and the seed graph lets its
// agent read before it exists.
//
// The package imports nothing, so the agent, extsdk and ctl may depend on it without linking any of the hub.
package objectnames
