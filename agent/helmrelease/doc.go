// Package helmrelease owns the agent's Helm releases: it fetches the chart of a ControllerDeployment (its
// helm.rawChart, or its helm.ociRepository pulled from an OCI registry), renders it, installs or upgrades it as a
// real Helm release in the seed, judges the health of what the release deployed, and uninstalls it. The agent's
// ControllerInstallation controller uses it to deploy an extension's chart into namespace extension-<installation>
// as release <registration name>, as gardenlet does (gardenlet hands the rendered chart to a ManagedResource; Trellis
// keeps Helm's own release bookkeeping instead).
//
// Everything Helm does is done by helm.sh/helm/v3: chart/loader reads archives, action renders, installs, upgrades
// and uninstalls, storage keeps the releases in Secrets sh.helm.release.v1.<name>.v<revision> of the release's
// namespace (the "secret" driver), registry pulls charts. This package adds what a controller retrying forever
// needs around it:
//
//   - Fetch. A raw chart is returned as is with its sha256. An OCI chart (ref | repository+tag | repository+digest;
//     a digest wins over a tag, a ref over both, Gardener's rules) is pulled with Helm's registry client over TLS
//     only, trusting the system roots plus an optional CA bundle, with credentials from an optional
//     .dockerconfigjson used for the registry's host only (the agent's own docker and Helm credentials are never
//     used). Pulled archives are kept in memory by repository and manifest digest, least recently used
//     first out, within Config.ChartCacheBytes: a digest that is cached is never fetched again; a tag is resolved to
//     its digest on every Fetch and then served from the cache. Concurrent Fetches of one digest pull it once.
//   - Render renders client-side with Helm's default capabilities, for validating a chart before it is applied.
//   - Apply installs, or upgrades with the caller's complete values (never reusing the stored ones), without hooks
//     and without waiting for readiness; health is judged separately by Health. It is a no-op when the deployed
//     revision carries the same chart (the archive's sha256, kept in the release label
//     helmrelease.trellis.dev/chart-digest) and semantically equal values (compared in JSON normal form), so a
//     periodic resync creates no revisions. Upgrades keep Config.MaxHistory revisions. A release whose last
//     revision failed is upgraded; one left pending-install/-upgrade/-rollback (the process died, or an operation
//     was cut off) is marked failed and then upgraded; one left uninstalling is uninstalled and installed again.
//     Apply and Uninstall of one release are serialised within a Manager; a Manager assumes it is the only writer
//     of its releases (one active agent per seed).
//   - Health reads the release's Deployments, StatefulSets and DaemonSets live from the seed and judges them with
//     Gardener's rules (pkg/utils/kubernetes/health, and the resource manager's progressing check).
//
// Bounds. Helm's actions take no context. The Manager ties every request an operation sends to the seed to the
// operation's context (and Config.OperationTimeout), so a cancelled Apply or Uninstall returns promptly and leaves
// no goroutine behind; only the release records are written through a client bounded by Config.RequestTimeout
// rather than by the context, so that an operation cut off by its context still records its failure.
//
// Not done, on purpose: hooks are not run (gardenlet ignores them too: it deploys only a chart's manifests); the
// release namespace is not created (the caller creates extension-<installation>); objects owned by another release
// or by nobody are not adopted (Helm's ownership check stands); drift of live objects under an unchanged release is
// not corrected by Apply (Health reports missing workloads); CRDs in a chart's crds/ directory are created on
// install only and never deleted, as Helm does.
package helmrelease
