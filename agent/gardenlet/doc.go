// Package gardenlet owns the agent's self-upgrade, gardenlet's Gardenlet controller: the agent watches its
// Gardenlet on the hub (seedmanagement.gardener.cloud/v1alpha1, garden/<seed>) and upgrades its own Helm release in
// the seed (the trellis-agent chart, release and namespace from the chart's env TRELLIS_AGENT_RELEASE_NAME and
// TRELLIS_AGENT_RELEASE_NAMESPACE) when the values the Gardenlet asks for differ from the deployed revision's, or
// when it is annotated gardener.cloud/operation=reconcile or force-redeploy (removed once handled; force-redeploy
// also rolls the pod). The outcome is the Gardenlet's GardenletReconciled condition and observedGeneration.
//
// What the Gardenlet sets (DesiredValues): spec.deployment's image (ref repository:tag, or repository, tag,
// pullPolicy), resources, podLabels, podAnnotations, tolerations, serviceAccountName and imageVectorOverwrite, and of
// spec.config the keys the agent's configuration shares with gardenlet's (ConfigKeys). env, additional volumes and
// componentImageVectorOverwrite are refused by name in the status; replicaCount, revisionHistoryLimit and
// enableHealthProbes are not taken (one replica, probes always). The chart is the one the agent's image carries
// (embedded from deploy/charts): spec.deployment.helm.ociRepository, which Gardener's API requires, is not fetched,
// as no OCI registry is assumed (docs/install.md).
//
// An upgrade is server-side apply of the new revision (package helmrelease). The Deployment rolls out with
// maxUnavailable 0, so the running agent stays until the new pod is ready, and it judges the rollout: once the
// release is healthy, the agent that then runs (the new one) reports GardenletReconciled True. When a new pod does
// not become ready (a container waits for ErrImagePull, ImagePullBackOff, CrashLoopBackOff and the like past
// Config.FailureGrace, or any pod is not ready past Config.RolloutTimeout), the agent applies the values of the
// previous deployed revision again (a new revision with the chart it carries, Helm's rollback in effect) and reports
// GardenletReconciled False with reason ReconcileError, the new pod's waiting reason and the revisions; that
// generation is then not tried again until the spec changes or an operation annotation asks.
package gardenlet
