package agent

import rbacv1 "k8s.io/api/rbac/v1"

// SeedAccessRule is one thing the agent does in its seed cluster: the API groups, resources and verbs, and the code
// that does it.
type SeedAccessRule struct {
	Groups    []string
	Resources []string
	Verbs     []string
	// Why names the code that needs the rule; the chart's documentation (docs/install.md) explains it from here.
	Why string
}

// SeedAccess lists every request the agent makes to its seed's kube-apiserver, by group, resource and verb. It is
// the ceiling of the RBAC that deploy/charts/trellis-agent grants (the chart's tests fail when the chart grants a verb
// that is not listed here, or lacks one that is), and it is kept next to the code: a change that makes the agent
// use a new verb adds it here. Discovery (/api, /apis), /version and /healthz need no rule: every authenticated user
// may read them (system:discovery, system:public-info-viewer).
//
// Clients: the controller-runtime client of the seed side reads the extension kinds from informers (list and watch,
// cluster-wide) and Secrets, ConfigMaps, Namespaces and Services directly (agent/controllers.go); Helm (package
// helmrelease) installs ControllerInstallations' charts with get, create, patch and delete of their objects and keeps
// releases in Secrets of the release's namespace.
var SeedAccess = []SeedAccessRule{
	{Groups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "create", "update", "delete"},
		Why: "shoot namespaces shoot--<project>--<name> (shoot flow), extension-<installation> namespaces " +
			"(controllerinstallation: create, label, delete), garden namespaces of backups (backupbucket, backupentry); " +
			"seed care lists namespaces for extension heartbeats and reads kube-system's UID"},
	{Groups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"},
		Why: "the agent's own kubeconfig Secret (identity), Helm's release storage sh.helm.release.v1.* (helmrelease), " +
			"Secrets of ControllerInstallations' charts, which Helm upgrades by patches (provider-local's machine provider token), " +
			"shoot credentials and their rotation (shoot/credentials; the agent's own client certificate of a shoot is read " +
			"to act in it, also by the ManagedSeed controller, managedseed), backup credentials copied from the hub " +
			"(backupbucket, backupentry)"},
	{Groups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"},
		Why: "the shoot flow's ConfigMaps in the shoot namespace (shoot/reconcile.go, created or updated); seed care " +
			"reads kube-system/cluster-identity"},
	{Groups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "create", "update", "delete"},
		Why: "the shoot's kube-apiserver Service, which the shoot flow creates or updates (shoot/reconcile.go) and " +
			"whose address DNS records, health probes, the tunnel and the ManagedSeed controller use (tunnel.go, " +
			"managedseed); etcd's client Service of the " +
			"shoot control plane, deleted with it (shoot/controlplane.go)"},
	{Groups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"},
		Why: "whether the seed can run the shoot control planes' pods (shoot/controlplane.go, mode Auto: one Node is enough)"},
	{Groups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"},
		Why: "the shoot control plane's pods, waited for when it scales down (shoot/controlplane_ops.go)"},
	{Groups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "delete"},
		Why: "etcd's volumes of a deleted shoot control plane, listed, deleted and read until they are gone " +
			"(shoot/controlplane_ops.go)"},
	{Groups: []string{"apps"}, Resources: []string{"deployments", "statefulsets"}, Verbs: []string{"update"},
		Why: "the shoot control plane: etcd's StatefulSet and the Deployments of kube-apiserver, kube-controller-manager " +
			"and kube-scheduler, created or updated (shoot/controlplane.go), scaled by patches on hibernation"},
	{Groups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: []string{"create", "patch", "delete"},
		Why: "etcd of the shoot control plane (shoot/controlplane.go, shoot/controlplane_ops.go)"},
	{Groups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"get", "create", "patch", "delete"},
		Why: "objects of extension charts (helmrelease: install, upgrade, uninstall)"},
	{Groups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "create", "patch", "delete"},
		Why: "objects of extension charts (helmrelease), and their health (helmrelease/health.go reads Deployments, " +
			"StatefulSets and DaemonSets of a release)"},
	{Groups: []string{"apps"}, Resources: []string{"statefulsets", "daemonsets"}, Verbs: []string{"get"},
		Why: "health of an extension chart's workloads (helmrelease/health.go)"},
	{Groups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles", "clusterrolebindings", "roles", "rolebindings"},
		Verbs: []string{"get", "create", "patch", "delete"},
		Why:   "RBAC objects of extension charts (helmrelease)"},
	{Groups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles", "roles"}, Verbs: []string{"bind", "escalate"},
		Why: "an extension chart grants its controller permissions the agent does not hold itself (provider-local " +
			"updates extension status and writes Leases); without escalate and bind the API server refuses such Roles " +
			"and their bindings"},
	{Groups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "create", "patch"},
		Why: "the agent server-side applies the extension CRDs it ships at start (an apply of a missing object is a " +
			"create) and waits for them to be established (deploy/crds.Install); seed care reads them"},
	{Groups: []string{"extensions.gardener.cloud"},
		Resources: []string{"backupbuckets", "backupentries", "bastions", "clusters", "containerruntimes", "controlplanes",
			"dnsrecords", "extensions", "infrastructures", "networks", "operatingsystemconfigs", "workers"},
		Verbs: []string{"list", "watch", "create", "update", "patch", "delete"},
		Why: "the extension objects of shoots, backups and bastions: created or updated, annotated, deleted " +
			"(agent/extension); read from informers only, never with a get (the seed's audit log shows none)"},
	{Groups: []string{"extensions.gardener.cloud"},
		Resources: []string{"backupentries/status", "containerruntimes/status", "controlplanes/status", "dnsrecords/status",
			"extensions/status", "infrastructures/status", "networks/status", "operatingsystemconfigs/status", "workers/status"},
		Verbs: []string{"update", "patch"},
		Why:   "restoring a migrated shoot's extension state (shoot/reconcile.go) and a restored backup entry's state (backupentry)"},
	{Groups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"},
		Why: "seed care reads the extensions' heartbeat Leases gardener-extension-heartbeat"},
	{Groups: []string{""}, Resources: []string{"configmaps", "services", "secrets"}, Verbs: []string{"patch"},
		Why: "the agent's own release (gardenlet self-upgrade, agent/gardenlet): its configuration ConfigMap, metrics " +
			"Service and bootstrap-token Secret, server-side applied on an upgrade or a rollback"},
	{Groups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"get", "create", "patch", "delete"},
		Why: "the agent's own PodDisruptionBudget (gardenlet self-upgrade: server-side applied, deleted when disabled)"},
	{Groups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "create", "patch", "delete"},
		Why: "the agent's own NetworkPolicy (gardenlet self-upgrade: server-side applied, deleted when disabled)"},
	{Groups: []string{""}, Resources: []string{"users", "groups"}, Verbs: []string{"impersonate"},
		Why: "seed API requests through the hub (tunnel.go) are made as the hub's user (Impersonate-User and " +
			"-Group), so that the seed's RBAC decides them, not the agent's"},
}

// SeedRules returns SeedAccess as RBAC rules, in its order.
func SeedRules() []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(SeedAccess))
	for _, r := range SeedAccess {
		out = append(out, rbacv1.PolicyRule{APIGroups: r.Groups, Resources: r.Resources, Verbs: r.Verbs})
	}
	return out
}
