package ctl

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/ctl/resource"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// Completion: resource types from the kinds, names from the hub (in the namespace the flags select), namespaces,
// projects and contexts. Completion never fails: what cannot be listed is not offered.

const noFiles = cobra.ShellCompDirectiveNoFileComp

// completeRefs completes TYPE, then NAMEs of that type; TYPE/NAME forms complete the name after the slash.
func (a *app) completeRefs(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if typ, prefix, ok := strings.Cut(toComplete, "/"); ok && len(args) == 0 || ok && strings.Contains(args[0], "/") {
		k, err := a.reg.Lookup(typ)
		if err != nil {
			return nil, noFiles
		}
		var out []string
		for _, n := range a.names(cmd.Context(), k) {
			if strings.HasPrefix(n, prefix) {
				out = append(out, typ+"/"+n)
			}
		}
		return out, noFiles
	}
	if len(args) == 0 {
		return a.completeTypes(cmd, args, toComplete)
	}
	k, err := a.reg.Lookup(args[0])
	if err != nil {
		return nil, noFiles
	}
	return a.names(cmd.Context(), k), noFiles
}

// completeTypes completes the first argument with resource types.
func (a *app) completeTypes(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, noFiles
	}
	return a.reg.Names(), noFiles
}

// completeNamesOf completes the first argument with names of one resource.
func (a *app) completeNamesOf(resourceName string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		k, err := a.reg.Lookup(resourceName)
		if err != nil || len(args) > 0 {
			return nil, noFiles
		}
		return a.names(cmd.Context(), k), noFiles
	}
}

func (a *app) completeShoots(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return a.completeNamesOf("shoots.core.gardener.cloud")(cmd, args, toComplete)
}

func (a *app) completeNamespaces(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return a.completeNamesOf("namespaces")(cmd, nil, "")
}

func (a *app) completeProjects(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return a.completeNamesOf("projects.core.gardener.cloud")(cmd, nil, "")
}

func (a *app) completeContexts(_ *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	c, _, err := a.loadConfig()
	if err != nil {
		return nil, noFiles
	}
	var out []string
	for _, ctx := range c.Contexts {
		out = append(out, ctx.Name)
	}
	return out, noFiles
}

// names lists the names of a kind's objects in the command's namespace.
func (a *app) names(ctx context.Context, k *resource.Kind) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	c, ns, err := a.scoped(ctx, k, false)
	if err != nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	objs, _, err := c.List(cctx, &metav1.ListRequest{Namespace: ns, Limit: 1000})
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, resource.Meta(o).GetName())
	}
	return out
}
