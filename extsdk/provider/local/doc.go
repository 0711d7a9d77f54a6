// Package local owns provider-local: an extension built only on extsdk that serves spec.type "local" for every
// extension kind and, instead of cloud resources, makes observable objects in the seed (ConfigMaps, Secrets,
// Services) and directories on the local filesystem. It is what the demo and the end-to-end tests run, modelled on
// Gardener's provider-local (docs/provider-local.md lists every output).
//
// Add registers with a controller-runtime manager one generic reconciler (extsdk/controller) per kind and type, the
// health checks (extsdk/healthcheck) of ControlPlane, Worker and Network, and the heartbeat (extsdk/heartbeat).
// Files: one per kind (infrastructure.go, controlplane.go, worker.go, operatingsystemconfig.go, dnsrecord.go,
// backupbucket.go, backupentry.go, bastion.go; record.go for Network, ContainerRuntime and Extension), provider.go
// (Config, Add), health.go, inject.go (failure injection), objects.go (writing seed objects).
//
// Every reconcile is a handful of API calls and never waits: objects are server-side applied (one round trip, no
// read), own objects are read uncached through the manager's API reader, so the provider caches nothing but the
// extension kinds it watches.
//
// Migrate removes the seed-local objects of a kind and keeps what stands for external state (backup directories,
// DNS entries); status.state carries what Restore needs to rebuild the same world (the Infrastructure's network id,
// the Worker's machines). Failure injection (inject.go): the annotation provider.local.trellis.dev/fail-<kind> on
// an extension object or on its Shoot makes Reconcile and Restore fail with the annotation's value as error code;
// fail-delete-<kind> and fail-migrate-<kind> do the same for Delete and Migrate. ForceDelete ignores them.
package local
