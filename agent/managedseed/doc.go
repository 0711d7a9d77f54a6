// Package managedseed owns the agent's ManagedSeed controller: gardenlet's managedseed controller, for the
// ManagedSeeds (seedmanagement.gardener.cloud/v1alpha1, namespace garden) whose shoot runs on the agent's seed.
//
// A ManagedSeed registers its Shoot as a Seed named as the ManagedSeed: the agent of the shoot's seed installs the
// agent chart (deploy/charts/trellis-agent) into the shoot, and the agent that runs there registers the Seed at the
// hub. For each such ManagedSeed the controller
//
//   - keeps the finalizer "gardener";
//   - sets ShootReconciled: False (Reconciling) while the shoot's last operation has not succeeded for its current
//     generation, then True (Reconciled); nothing is deployed before;
//   - reads the Seed template from spec.gardenlet.config (a gardenlet.config.gardener.cloud/v1alpha1
//     GardenletConfiguration: seedConfig's labels, annotations and spec; the name is the ManagedSeed's; logLevel and
//     logFormat are passed on too);
//   - installs release "trellis-agent" in namespace garden of the shoot with Helm, through the shoot's
//     kube-apiserver as the agent's own user (shoot.AdminREST): the hub's address and CA bundle are this agent's own
//     (Gardener's mergeWithParent of the garden connection), with mergeWithParent also this agent's image vector of
//     the shoot control plane (Config.ImageVector, the chart's imageVector), the image is
//     spec.gardenlet.deployment.image when set (else the chart's), one replica (the agent has no leader election), the deployment's pod labels and
//     annotations; while the shoot holds no agent credentials (Secret garden/gardenlet-kubeconfig), a fresh bootstrap
//     token the controller creates on the hub (kube-system/bootstrap-token-<id>, valid for TokenValidity, described
//     as the new seed's, so the hub lets it bootstrap that seed's agent only) is passed in bootstrap.token, and
//     once the credentials are there the token is dropped from the release and deleted on the hub;
//   - sets SeedRegistered: False while the new Seed does not report GardenletReady=True, True (SeedRegistered)
//     once it does; an error of any step sets SeedRegistered False with reason ReconcileError and its message.
//
// A deleted ManagedSeed (SeedRegistered False, Deleting) has its Seed deleted first; the hub refuses that while
// shoots still use the seed, and the controller retries every PollInterval until they are gone. Once the Seed is
// gone the release is uninstalled from the shoot, the shoot's namespace garden deleted and waited for, outstanding
// bootstrap tokens deleted, and the finalizer removed. A ManagedSeed whose shoot is gone only has its Seed deleted.
//
// Differences from Gardener: spec.gardenlet.deployment.replicaCount is not applied (one agent per seed), bootstrap
// mode ServiceAccount is refused (the hub has no service accounts for agents), and of the parent's configuration
// only the hub connection and the image vector are merged. Tokens are remembered in memory: after a restart of the
// agent a ManagedSeed still bootstrapping gets a new token, and the old one expires.
package managedseed
