package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	kmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/test/landscape"
	"github.com/trellis-dev/trellis/test/localnode"
	"github.com/trellis-dev/trellis/test/seedtest"
	"github.com/trellis-dev/trellis/test/timescale"
)

// seedGrant is one verb on one resource (resource/subresource) of one API group.
type seedGrant struct{ group, resource, verb string }

func (g seedGrant) String() string {
	group := g.group
	if group == "" {
		group = "core"
	}
	return group + " " + g.resource + " " + g.verb
}

// notExercised are the grants of the agent's ClusterRole that the run of TestAgentRBACIsWhatTheAgentDoes does not
// reach, with the path of the agent that needs them. The test fails when one of them is seen after all (the list must
// shrink then) and when any other grant is never seen: everything else the ClusterRole grants is derived from the
// seed's audit log.
var notExercised = func() map[seedGrant]string {
	out := map[seedGrant]string{}
	add := func(group string, res, verbs []string, why string) {
		for _, r := range res {
			for _, v := range verbs {
				out[seedGrant{group, r, v}] = why
			}
		}
	}
	ext := "extensions.gardener.cloud"
	kinds := []string{"backupbuckets", "backupentries", "bastions", "clusters", "containerruntimes", "controlplanes",
		"dnsrecords", "extensions", "infrastructures", "networks", "operatingsystemconfigs", "workers"}
	add(ext, kinds, []string{"list"}, "the informers' reflectors list only when the seed serves no watch lists "+
		"(streaming lists); this seed does")
	add(ext, []string{"backupentries/status", "containerruntimes/status", "controlplanes/status", "dnsrecords/status",
		"extensions/status", "infrastructures/status", "networks/status", "operatingsystemconfigs/status", "workers/status"},
		[]string{"update", "patch"}, "restoring extension state after a control-plane migration or a BackupEntry's "+
			"restore (TestShootLifecycle migrates)")
	add(ext, []string{"bastions"}, []string{"create", "update", "patch", "delete"}, "Bastions: the run opens none")
	add(ext, []string{"containerruntimes", "extensions"}, []string{"create", "update", "patch", "delete"},
		"shoots with extensions or a container runtime: the example shoot has none")
	add(ext, []string{"backupbuckets"}, []string{"update", "patch", "delete"}, "a BackupBucket reconciled again or "+
		"deleted with its seed")
	add(ext, []string{"backupentries"}, []string{"update"}, "a BackupEntry reconciled again")
	add(ext, []string{"clusters"}, []string{"patch"}, "a Cluster's shoot state patched during a migration")
	// patch is used: objects of extension charts are server-side applied (agent/helmrelease), on install too.
	add("", []string{"serviceaccounts"}, []string{"delete"}, "Helm uninstalls of extension charts and objects an "+
		"upgrade drops (the run installs provider-local once)")
	add("rbac.authorization.k8s.io", []string{"clusterroles", "clusterrolebindings", "roles", "rolebindings"},
		[]string{"delete"}, "Helm uninstalls of extension charts and objects an upgrade drops")
	selfUpgrade := "the agent's self-upgrade of its own release after its Gardenlet (agent/gardenlet): the run " +
		"creates no Gardenlet"
	// patch on secrets is used: provider-local's chart holds its machine provider's token in a Secret.
	add("", []string{"configmaps", "services"}, []string{"patch"}, selfUpgrade)
	add("policy", []string{"poddisruptionbudgets"}, []string{"get", "create", "patch", "delete"}, selfUpgrade)
	add("networking.k8s.io", []string{"networkpolicies"}, []string{"get", "create", "patch", "delete"}, selfUpgrade)
	add("apps", []string{"daemonsets"}, []string{"get"}, "health of extension charts with DaemonSets (provider-local "+
		"has none)")
	add("", []string{"configmaps"}, []string{"create", "update"}, "shoots referencing ConfigMaps (spec.resources, "+
		"an audit policy): the example shoot references none")
	add("", []string{"namespaces"}, []string{"update"}, "labelling an extension namespace that exists already")
	add("", []string{"services"}, []string{"update"}, "a shoot's kube-apiserver Service that changed")
	return out
}()

// racing are grants the run uses or not depending on timing, each with the race; the test accepts either.
var racing = map[seedGrant]string{
	{"", "persistentvolumeclaims", "get"}: "etcd's volumes of a deleted control plane: the StatefulSet controller " +
		"deletes them with the StatefulSet (retention WhenDeleted: Delete), often before the agent lists them",
	{"", "persistentvolumeclaims", "delete"}: "as get",
}

// TestAgentRBACIsWhatTheAgentDoes derives the agent's seed RBAC from what the agent actually does: a landscape whose
// seed's kube-apiserver writes an audit log runs the agent as its chart's pod with the chart's ClusterRole, installs
// provider-local through its ControllerInstallation (Helm), and takes the example shoot with its control plane on
// the node through create, reconcile, hibernation and deletion, with a request through the hub's seed API proxy
// (impersonation) and backups on. Every request the agent's ServiceAccount made is read back from the audit log. The
// test fails when the ClusterRole grants a verb on a resource the agent never used (besides notExercised), when the
// agent made a request the ClusterRole does not grant, and when the seed refused the agent anything.
func TestAgentRBACIsWhatTheAgentDoes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a landscape of real binaries with a node")
	}
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("a local node needs root")
	}
	landscapeBinaries(t)
	localnode.TakeTurn(t)
	ctx, cancel := context.WithTimeout(context.Background(), timescale.Scale(10*time.Minute))
	defer cancel()
	l := startLandscape(ctx, t, landscape.Config{
		Node:                 true,
		Examples:             true,
		RequireProviderLocal: true,
		SeedAuditLog:         true,
		MachinesHostNoSeeds:  true, // the example shoot never becomes a seed
	})
	seed := l.Seed(landscape.DefaultSeedName)
	r := newREST(t, l)
	const shootPath = "/apis/core.gardener.cloud/v1beta1/namespaces/garden-local/shoots/local"
	shoot := func() *shootStatus {
		code, body := r.do(http.MethodGet, shootPath, nil)
		if code == http.StatusNotFound {
			return nil
		}
		var s shootStatus
		if code != http.StatusOK || json.Unmarshal(body, &s) != nil {
			t.Fatalf("get shoot: %d %s", code, body)
		}
		return &s
	}
	wait := func(what string, cond func(*shootStatus) bool) {
		t.Helper()
		var last *shootStatus
		// A create needs a control plane and a machine (which imports the control plane's images too): on a loaded
		// 2-core machine 5 and 4 minutes.
		limit := timescale.Scale(5 * time.Minute)
		for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if last = shoot(); cond(last) {
				return
			}
		}
		logs, err := seed.AgentPodLogs(ctx)
		t.Logf("the agent's pod (%v):\n%s", err, logs)
		t.Fatalf("the example shoot: no %s after %v; last %v", what, limit, last)
	}
	wait("Succeeded create", succeededAt(0))

	// A reconcile asked for with the operation annotation.
	r.must(http.StatusOK, http.MethodPatch, shootPath, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		"gardener.cloud/operation": "reconcile"}}})
	wait("reconcile", func(s *shootStatus) bool {
		return succeededAt(0)(s) && s.Metadata.Annotations["gardener.cloud/operation"] == "" &&
			s.Status.LastOperation.Type == "Reconcile"
	})
	// Hibernation scales the control plane down.
	gen := shoot().Metadata.Generation
	r.must(http.StatusOK, http.MethodPatch, shootPath, map[string]any{"spec": map[string]any{"hibernation": map[string]any{"enabled": true}}})
	wait("hibernation", succeededAt(gen+1))

	// The hub's seed API proxy: the agent impersonates the hub's user.
	if code, body := r.do(http.MethodGet, "/tunnels/seeds/"+seed.Name+"/api/v1/namespaces/kube-system", nil); code != http.StatusOK {
		t.Fatalf("the seed API through the hub: %d %s", code, body)
	}

	r.must(http.StatusOK, http.MethodPatch, shootPath, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		"confirmation.gardener.cloud/deletion": "true"}}})
	if code, body := r.do(http.MethodDelete, shootPath, nil); code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("delete shoot: %d %s", code, body)
	}
	wait("deletion", func(s *shootStatus) bool { return s == nil })

	// The ClusterRole the chart installed, and the user it is bound to.
	user, granted := installedAgentRBAC(ctx, t, seed.Client)
	seen, refused, wrote := auditedRequests(t, seed.AuditLog, user)
	for _, e := range refused {
		t.Errorf("the seed refused the agent: %s", e)
	}
	// bind and escalate: seen when the agent wrote an RBAC object granting more than it holds.
	for _, w := range wrote {
		if g, ok := grantsBeyond(ctx, t, seed.Client, w, granted); ok {
			seen[g] = true
		}
	}

	var unused, ungranted []string
	for g := range granted {
		why, skip := notExercised[g]
		switch {
		case seen[g] && skip:
			t.Errorf("%s is listed as not exercised (%s) but the run used it: drop it from notExercised", g, why)
		case !seen[g] && !skip && racing[g] == "":
			unused = append(unused, g.String())
		}
	}
	for g := range seen {
		if !granted[g] {
			ungranted = append(ungranted, g.String())
		}
	}
	sort.Strings(unused)
	sort.Strings(ungranted)
	if len(unused) > 0 {
		t.Errorf("the agent's ClusterRole grants what the agent never did in this run:\n  %s", strings.Join(unused, "\n  "))
	}
	if len(ungranted) > 0 {
		t.Errorf("the agent did what its ClusterRole does not grant:\n  %s", strings.Join(ungranted, "\n  "))
	}
	t.Logf("the agent used %d grants of %d", len(seen), len(granted))
}

// installedAgentRBAC returns the user of the agent's ServiceAccount and the grants of the ClusterRole the agent's
// chart bound to it in the seed, expanded to one a verb and resource.
func installedAgentRBAC(ctx context.Context, t *testing.T, c kubernetes.Interface) (string, map[seedGrant]bool) {
	t.Helper()
	sel := kmetav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + landscape.AgentRelease}
	bindings, err := c.RbacV1().ClusterRoleBindings().List(ctx, sel)
	if err != nil || len(bindings.Items) != 1 || len(bindings.Items[0].Subjects) != 1 {
		t.Fatalf("the agent chart's ClusterRoleBinding: %v %v", bindings, err)
	}
	b := bindings.Items[0]
	sa := b.Subjects[0]
	role, err := c.RbacV1().ClusterRoles().Get(ctx, b.RoleRef.Name, kmetav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return "system:serviceaccount:" + sa.Namespace + ":" + sa.Name, expandRules(t, role.Rules)
}

// expandRules expands rules to their grants; the agent's rules name no resources and use no wildcards (the chart's
// tests refuse both).
func expandRules(t *testing.T, rules []rbacv1.PolicyRule) map[seedGrant]bool {
	out := map[seedGrant]bool{}
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Fatalf("rule %+v names resources or URLs", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out[seedGrant{g, res, v}] = true
				}
			}
		}
	}
	return out
}

// rbacWrite is an RBAC object the agent created, updated or patched.
type rbacWrite struct{ resource, namespace, name string }

// auditedRequests reads the audit log for the requests user made: the grants they needed (impersonation counts as
// impersonate on users and groups, the impersonated request as the hub user's, not the agent's), the requests the
// seed refused (403), and the RBAC objects the agent wrote. Requests every authenticated user may make
// (self-subject reviews, non-resource URLs) need no grant.
func auditedRequests(t *testing.T, path, user string) (map[seedGrant]bool, []string, []rbacWrite) {
	t.Helper()
	events, err := seedtest.ReadAuditLog(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[seedGrant]bool{}
	var refused []string
	wrote := map[rbacWrite]bool{}
	for _, e := range events {
		// Watches are complete only when they end: their ResponseStarted events count too.
		if e.User.Username != user || e.ObjectRef == nil {
			continue
		}
		ref := e.ObjectRef
		if e.ImpersonatedUser != nil {
			seen[seedGrant{"", "users", "impersonate"}] = true
			if len(e.ImpersonatedUser.Groups) > 0 {
				seen[seedGrant{"", "groups", "impersonate"}] = true
			}
			continue
		}
		if e.Code() == http.StatusForbidden {
			refused = append(refused, fmt.Sprintf("%s %s", e.Verb, e.RequestURI))
			continue
		}
		if ref.APIGroup == "authorization.k8s.io" || ref.APIGroup == "authentication.k8s.io" {
			continue
		}
		res := ref.Resource
		if ref.Subresource != "" {
			res += "/" + ref.Subresource
		}
		seen[seedGrant{ref.APIGroup, res, e.Verb}] = true
		// A server-side apply or update that creates its object was authorized for create too.
		if e.Code() == http.StatusCreated && (e.Verb == "patch" || e.Verb == "update") {
			seen[seedGrant{ref.APIGroup, res, "create"}] = true
		}
		if ref.APIGroup == "rbac.authorization.k8s.io" && ref.Subresource == "" && e.Code() < 300 &&
			(e.Verb == "create" || e.Verb == "update" || e.Verb == "patch") {
			wrote[rbacWrite{ref.Resource, ref.Namespace, ref.Name}] = true
		}
	}
	return seen, refused, slices.Collect(func(yield func(rbacWrite) bool) {
		for w := range wrote {
			if !yield(w) {
				return
			}
		}
	})
}

// grantsBeyond reports whether the RBAC object w grants something the agent's grants lack, and so needed a grant
// that is no request of its own: escalate on w's kind for a role, bind on the referenced role's kind for a binding.
// RBAC checks both when the agent writes such an object (the extension charts Helm installs). An object gone by the
// end of the run (an uninstalled chart) is judged by nothing and reports false.
func grantsBeyond(ctx context.Context, t *testing.T, c kubernetes.Interface, w rbacWrite, agent map[seedGrant]bool) (seedGrant, bool) {
	t.Helper()
	rbac := c.RbacV1()
	var rules []rbacv1.PolicyRule
	needs := seedGrant{"rbac.authorization.k8s.io", w.resource, "escalate"}
	roleOf := func(ref rbacv1.RoleRef, ns string) {
		if ref.Kind == "ClusterRole" {
			needs.resource = "clusterroles"
			if r, err := rbac.ClusterRoles().Get(ctx, ref.Name, kmetav1.GetOptions{}); err == nil {
				rules = r.Rules
			}
		} else if r, err := rbac.Roles(ns).Get(ctx, ref.Name, kmetav1.GetOptions{}); err == nil {
			needs.resource = "roles"
			rules = r.Rules
		}
	}
	switch w.resource {
	case "clusterroles":
		if r, err := rbac.ClusterRoles().Get(ctx, w.name, kmetav1.GetOptions{}); err == nil {
			rules = r.Rules
		}
	case "roles":
		if r, err := rbac.Roles(w.namespace).Get(ctx, w.name, kmetav1.GetOptions{}); err == nil {
			rules = r.Rules
		}
	case "clusterrolebindings":
		needs.verb = "bind"
		if b, err := rbac.ClusterRoleBindings().Get(ctx, w.name, kmetav1.GetOptions{}); err == nil {
			roleOf(b.RoleRef, "")
		}
	case "rolebindings":
		needs.verb = "bind"
		if b, err := rbac.RoleBindings(w.namespace).Get(ctx, w.name, kmetav1.GetOptions{}); err == nil {
			roleOf(b.RoleRef, w.namespace)
		}
	}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			return needs, true
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" || !agent[seedGrant{g, res, v}] {
						return needs, true
					}
				}
			}
		}
	}
	return needs, false
}
