// Package helmrelease owns the agent's Helm releases: it fetches the chart of a ControllerDeployment (its
// helm.rawChart, or its helm.ociRepository pulled from an OCI registry), renders it, installs or upgrades it as a
// real Helm release in the seed, judges the health of what the release deployed, and uninstalls it. The agent's
// ControllerInstallation controller uses it to deploy an extension's chart into namespace extension-<installation>
// as release <registration name>, as gardenlet does (gardenlet hands the rendered chart to a ManagedResource; Trellis
// keeps Helm's own release bookkeeping instead).
//
// Charts are Helm's and so are releases: helm.sh/helm/v3's chart/loader reads archives, chartutil and engine render
// them with Helm's values, capabilities and template functions (lookup included), releaseutil orders the objects, and
// registry pulls charts. The release records are Helm's own format (Secrets sh.helm.release.v1.<name>.v<revision>
// of the release's namespace, what Helm's "secret" storage driver writes: the helm CLI lists and reads them, and
// releases recorded by Helm are read), but written here (records.go), and objects are written here too (objects.go):
// Helm's pkg/action, pkg/kube and storage drivers are not linked, because they pull in kubectl, kustomize (and with it
// Go's plugin package), the SQL storage driver and OpenPGP, tens of megabytes of an agent that must stay small (issue
// 21). What this package does as Helm's install, upgrade and uninstall do:
//
//   - Objects are written with server-side apply (field manager trellis-agent, forced) in Helm's install order, each
//     with Helm's ownership metadata (label app.kubernetes.io/managed-by=Helm, annotations meta.helm.sh/release-name
//     and meta.helm.sh/release-namespace). An object that exists without this release's ownership metadata and is
//     not part of the revision being replaced fails the install or upgrade before anything is recorded.
//   - An upgrade removes the objects of the replaced revision (the deployed one, else the last) that the new one no
//     longer has, unless the live object is annotated helm.sh/resource-policy: keep; an uninstall removes the
//     objects of the deployed revision in Helm's uninstall order except those the manifest marks keep.
//   - Revisions go pending-install/pending-upgrade, then deployed (the replaced one superseded) or failed with the
//     cause; uninstall marks the last revision uninstalling, deletes the objects and then every record.
//   - CRDs of a chart's crds/ directories are created on install when missing and awaited until established.
//
// Unlike Helm's client-side three-way merge, server-side apply leaves alone fields of a live object that the agent
// never applied: a field that a release created by Helm's client (an agent before this package's rewrite) set and
// that a later chart drops stays in the object until it is changed otherwise.
//
// Around that, what a controller retrying forever needs:
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
// Bounds. The Manager ties every request an operation sends to the seed (the lookup template function's too, and the
// registry's) to the operation's context (and Config.OperationTimeout), so a cancelled Apply or Uninstall returns promptly and leaves
// no goroutine behind; only the release records are written through a client bounded by Config.RequestTimeout
// rather than by the context, so that an operation cut off by its context still records its failure.
//
// Not done, on purpose: hooks are not run, only recorded in the release (gardenlet ignores them too: it deploys only a
// chart's manifests); the
// release namespace is not created (the caller creates extension-<installation>); objects owned by another release
// or by nobody are not adopted (Helm's ownership check stands); drift of live objects under an unchanged release is
// not corrected by Apply (Health reports missing workloads); CRDs in a chart's crds/ directory are created on
// install only and never deleted, as Helm does.
package helmrelease
