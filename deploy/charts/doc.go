// Package charts owns the Helm charts Trellis ships, one directory each: provider-local/ (the extension, inlined in
// its ControllerDeployment), trellis-hub/ and trellis-agent/ (installing Trellis itself, docs/install.md); and their
// packaging: Archive returns an embedded chart as the gzipped tar Helm loads
// (helm.sh/helm/v3/pkg/chart/loader.LoadArchive), the bytes a ControllerDeployment carries in helm.rawChart.
//
// Archives are deterministic: the same chart files give the same bytes on every machine and every run (sorted
// entries, fixed modes, owners and modification times, a gzip header without name or time), so the generated
// ControllerDeployment in deploy/extensions changes only when the chart does and `make checkgenerate` is stable. They
// follow Helm's layout (`helm package`): one top-level directory named after the chart, regular files only, mode
// 0644, the chart's .helmignore honoured. The bytes depend on compress/gzip's encoder, so a Go release that changes
// it changes them too (the chart inside stays the same); `make generate` then rewrites the generated files.
//
// ArchiveDir packages any chart directory of an fs.FS the same way, for tests that need a chart of their own (for
// example a deliberately broken one in a temporary directory).
//
// The provider-local chart is installed by the seed agent with Gardener's injected `gardener:` values;
// docs/provider-local.md describes its values. Its tests render it with Helm's install action and run
// provider-local against a real seed (test/seedtest, so `make testbin` first) with only the RBAC the chart grants.
// The hub's and the agent's charts are linted, rendered with default and HA values and every object is accepted by
// a real kube-apiserver (server-side dry run); the agent's ClusterRole must grant exactly what agent.SeedAccess
// lists, the requests the agent's code makes.
package charts
