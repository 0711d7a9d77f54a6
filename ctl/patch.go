package ctl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/ctl/printer"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func (a *app) patchCmd() *cobra.Command {
	var patch, typ, sub, output string
	cmd := &cobra.Command{
		Use:   "patch TYPE NAME | TYPE/NAME --patch PATCH",
		Short: "Change fields of an object with a JSON merge patch or a JSON patch",
		Example: `  trellisctl patch shoot local -p local --patch '{"spec":{"purpose":"development"}}'
  trellisctl patch shoot local -n garden-local --type json --patch '[{"op":"add","path":"/metadata/labels/team","value":"a"}]'
  trellisctl patch shoot local -n garden-local --subresource binding --patch '{"spec":{"seedName":"other"}}'`,
		ValidArgsFunction: a.completeRefs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			k, name, err := a.oneObject(args)
			if err != nil {
				return err
			}
			pt := mergePatch
			switch typ {
			case "merge", "strategic":
			case "json":
				pt = jsonPatch
			default:
				return fmt.Errorf("--type is merge or json, not %q", typ)
			}
			if sub != "" && !slices.Contains(k.PatchSubresources, sub) {
				return fmt.Errorf("%s has no subresource %q to patch (it has: %s)", k.Resource, sub, strings.Join(k.PatchSubresources, ", "))
			}
			body, err := yaml.YAMLToJSON([]byte(patch))
			if err != nil {
				return fmt.Errorf("--patch: %w", err)
			}
			c, ns, err := a.scoped(ctx, k, false)
			if err != nil {
				return err
			}
			cctx, cancel := a.call(ctx)
			defer cancel()
			obj, err := c.Patch(cctx, &metav1.PatchRequest{Namespace: ns, Name: name, Patch: &metav1.RawExtension{Raw: body}, PatchType: pt, Subresource: sub})
			if err != nil {
				return err
			}
			if output != "" {
				return a.printObjects(k, output, []proto.Message{obj})
			}
			fmt.Fprintf(a.opts.Out, "%s patched\n", printer.Name(k, obj))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&patch, "patch", "", "the patch, JSON or YAML")
	f.StringVar(&typ, "type", "merge", "merge (JSON merge patch) or json (JSON patch)")
	f.StringVar(&sub, "subresource", "", "patch a subresource, e.g. status or binding")
	f.StringVarP(&output, "output", "o", "", "print the result as yaml, json or name")
	_ = cmd.MarkFlagRequired("patch")
	return cmd
}
