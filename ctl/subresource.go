package ctl

import (
	"context"
	"fmt"
	"sort"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/ctl/hubconn"
	"github.com/trellis-dev/trellis/ctl/manifest"
	"github.com/trellis-dev/trellis/ctl/printer"
	"github.com/trellis-dev/trellis/ctl/resource"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

// subresourceCmds returns a command per subresource RPC of the kinds (update-status, update-binding, and whatever
// RPC a kind's service gains), taking the kinds that have it.
func (a *app) subresourceCmds() []*cobra.Command {
	byCommand := map[string][]*resource.Kind{}
	for _, k := range a.reg.Kinds() {
		for _, s := range k.Subresources {
			byCommand[s.Command] = append(byCommand[s.Command], k)
		}
	}
	names := make([]string, 0, len(byCommand))
	for n := range byCommand {
		names = append(names, n)
	}
	sort.Strings(names)
	var cmds []*cobra.Command
	for _, n := range names {
		cmds = append(cmds, a.subresourceCmd(n, byCommand[n]))
	}
	return cmds
}

func (a *app) subresourceCmd(command string, kinds []*resource.Kind) *cobra.Command {
	var f files
	var patch string
	var resources []string
	seen := map[string]bool{}
	for _, k := range kinds {
		if !seen[k.Resource] {
			seen[k.Resource] = true
			resources = append(resources, k.Resource)
		}
	}
	first, _ := kinds[0].Subresource(command)
	cmd := &cobra.Command{
		Use:   command + " TYPE NAME | TYPE/NAME (--patch PATCH | -f FILE)",
		Short: short(first, resources),
		Long: fmt.Sprintf(`%s calls the RPC %s of the kind's service (%s).

For RPCs that take the object itself, the command reads the object, merges --patch or the file into it (a JSON merge
patch: a partial object is enough) and sends the result, with the resourceVersion read. Other RPCs take the file as
their request message.

%s`, command, first.RPC, strings.Join(resources, ", "), first.Help),
		Example:           fmt.Sprintf("  trellisctl %s %s NAME -n NAMESPACE -f changes.yaml", command, resources[0]),
		ValidArgsFunction: a.completeRefs,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, name, err := a.oneObject(args)
			if err != nil {
				return err
			}
			sub, ok := k.Subresource(command)
			if !ok {
				return fmt.Errorf("%s has no %s; it is for %s", k.Resource, command, strings.Join(resources, ", "))
			}
			return a.callSubresource(cmd.Context(), k, sub, name, patch, &f)
		},
	}
	f.addFlags(cmd, false)
	cmd.Flags().StringVar(&patch, "patch", "", "changes to the object, as a JSON merge patch in JSON or YAML")
	return cmd
}

func (a *app) callSubresource(ctx context.Context, k *resource.Kind, sub resource.Subresource, name, patch string, f *files) error {
	var change []byte
	switch {
	case patch != "" && len(f.paths) > 0:
		return fmt.Errorf("give --patch or -f, not both")
	case patch != "":
		var err error
		if change, err = yaml.YAMLToJSON([]byte(patch)); err != nil {
			return fmt.Errorf("--patch: %w", err)
		}
	case len(f.paths) > 0:
		docs, err := manifest.Read(f.paths, f.recursive, a.opts.In)
		if err != nil {
			return err
		}
		if len(docs) != 1 {
			return fmt.Errorf("%s takes one document, got %d", sub.Command, len(docs))
		}
		change = docs[0].JSON
	default:
		return fmt.Errorf("%s needs --patch or -f", sub.Command)
	}
	ns, err := a.namespace(ctx, k, false)
	if err != nil {
		return err
	}
	_, conn, err := a.connect()
	if err != nil {
		return err
	}
	cctx, cancel := a.call(ctx)
	defer cancel()
	var out proto.Message
	if sub.Object {
		// The change is merged into the object as read, which is sent with its resourceVersion; when someone else
		// wrote the object in between (Conflict), merging into the new state is what the user asked for.
		for attempt := 0; ; attempt++ {
			in, err := mergeInto(cctx, k.Client(conn), k, ns, name, change)
			if err != nil {
				return err
			}
			out, err = sub.Call(cctx, conn, in)
			if hubconn.Reason(err) == "Conflict" && attempt < 4 {
				continue
			}
			if err != nil {
				return err
			}
			break
		}
	} else {
		in := sub.NewInput()
		if err := kjson.Unmarshal(change, in); err != nil {
			return err
		}
		if out, err = sub.Call(cctx, conn, in); err != nil {
			return err
		}
	}
	if f.output != "" {
		if _, isObject := out.(interface{ GetMetadata() *metav1.ObjectMeta }); isObject && proto.MessageName(out) == proto.MessageName(k.New()) {
			return a.printObjects(k, f.output, []proto.Message{out})
		}
		j, err := kjson.Marshal(out)
		if err != nil {
			return err
		}
		y, err := yaml.JSONToYAML(j)
		if err != nil {
			return err
		}
		_, err = a.opts.Out.Write(y)
		return err
	}
	fmt.Fprintf(a.opts.Out, "%s/%s %s done\n", printer.KindName(k), name, sub.RPC)
	return nil
}

// mergeInto reads an object and returns it with a JSON merge patch applied.
func mergeInto(ctx context.Context, c resource.Client, k *resource.Kind, ns, name string, patch []byte) (proto.Message, error) {
	cur, err := c.Get(ctx, &metav1.GetRequest{Namespace: ns, Name: name})
	if err != nil {
		return nil, err
	}
	return merge(k, cur, patch)
}

// merge returns an object with a JSON merge patch applied, decoded strictly.
func merge(k *resource.Kind, obj proto.Message, patch []byte) (proto.Message, error) {
	j, err := kjson.Marshal(obj)
	if err != nil {
		return nil, err
	}
	merged, err := jsonpatch.MergePatch(j, patch)
	if err != nil {
		return nil, err
	}
	return decode(k, merged)
}

// short is a subresource command's one-line help: the RPC and the kinds that have it, or how many.
func short(s resource.Subresource, resources []string) string {
	what := strings.Join(resources, ", ")
	if len(resources) > 3 {
		what = fmt.Sprintf("%d kinds, see --help", len(resources))
	}
	if s.Path != "" {
		return fmt.Sprintf("Call %s, the %s subresource (%s)", s.RPC, s.Path, what)
	}
	return fmt.Sprintf("Call %s (%s)", s.RPC, what)
}
