package ctl

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/ctl/hubconn"
	"github.com/trellis-dev/trellis/ctl/manifest"
	"github.com/trellis-dev/trellis/ctl/printer"
	"github.com/trellis-dev/trellis/ctl/resource"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// confirmationAnnotation is Gardener's deletion confirmation; the hub deletes projects and shoots only with it.
const confirmationAnnotation = "confirmation.gardener.cloud/deletion"

type deleteOptions struct {
	files          files
	s              selection
	confirm        bool
	ignoreNotFound bool
	wait           bool
	timeout        time.Duration
}

func (a *app) deleteCmd() *cobra.Command {
	var o deleteOptions
	cmd := &cobra.Command{
		Use:   "delete TYPE NAME... | TYPE/NAME... | TYPE -l SELECTOR | -f FILE",
		Short: "Delete objects",
		Long: `delete deletes the named objects, those a label selector selects, or those of manifests. Gardener deletes
projects and shoots only when they are annotated confirmation.gardener.cloud/deletion=true: --confirm sets the
annotation first. Objects with finalizers are only marked for deletion until their finalizers are removed; --wait
waits until they are gone.`,
		Example: `  trellisctl delete shoot local -p local --confirm --wait
  trellisctl delete -f manifests/
  trellisctl delete configmaps -n garden-dev -l app=demo`,
		ValidArgsFunction: a.completeRefs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.delete(cmd.Context(), args, &o)
		},
	}
	o.s.addFlags(cmd, false)
	f := cmd.Flags()
	f.StringArrayVarP(&o.files.paths, "filename", "f", nil, "delete the objects of these manifests (files, directories, -)")
	f.BoolVarP(&o.files.recursive, "recursive", "R", false, "read directories recursively")
	f.BoolVar(&o.confirm, "confirm", false, "annotate "+confirmationAnnotation+"=true before deleting (projects and shoots need it)")
	f.BoolVar(&o.ignoreNotFound, "ignore-not-found", false, "treat objects that do not exist as deleted")
	f.BoolVar(&o.wait, "wait", false, "wait until the objects are gone")
	f.DurationVar(&o.timeout, "timeout", 0, "with --wait, give up after this long (0: no limit)")
	return cmd
}

type target struct {
	kind     *resource.Kind
	ns, name string
	source   string
}

func (a *app) delete(ctx context.Context, args []string, o *deleteOptions) error {
	targets, err := a.deleteTargets(ctx, args, o)
	if err != nil {
		return err
	}
	failed := false
	for _, t := range targets {
		if err := a.deleteOne(ctx, t, o); err != nil {
			if t.source != "" {
				reportDocument(a.opts.Err, "deleting", t.source, err)
			} else {
				printError(a.opts.Err, err)
			}
			failed = true
		}
	}
	if failed {
		return errReported
	}
	return nil
}

// deleteTargets resolves what to delete: manifests, names, or a selector's objects.
func (a *app) deleteTargets(ctx context.Context, args []string, o *deleteOptions) ([]target, error) {
	var out []target
	if len(o.files.paths) > 0 {
		if len(args) > 0 {
			return nil, fmt.Errorf("give either -f or resources, not both")
		}
		docs, err := manifest.Read(o.files.paths, o.files.recursive, a.opts.In)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			k, _, ns, err := a.prepare(ctx, d)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", d.Source, err)
			}
			out = append(out, target{kind: k, ns: ns, name: d.Name, source: d.Source})
		}
		return out, nil
	}
	refs, err := a.parseRefs(args)
	if err != nil {
		return nil, err
	}
	for _, r := range refs {
		if len(r.names) == 0 && o.s.labels == "" && o.s.fields == "" {
			return nil, fmt.Errorf("name the %s to delete, or select them with -l or --field-selector", r.kind.Resource)
		}
		objs, err := a.selected(ctx, r, &o.s)
		if err != nil && !(o.ignoreNotFound && hubconn.IsNotFound(err)) && len(r.names) == 0 {
			return nil, err
		}
		if len(r.names) > 0 {
			ns, err := a.namespace(ctx, r.kind, false)
			if err != nil {
				return nil, err
			}
			for _, n := range r.names {
				out = append(out, target{kind: r.kind, ns: ns, name: n})
			}
			continue
		}
		for _, obj := range objs {
			md := resource.Meta(obj)
			out = append(out, target{kind: r.kind, ns: md.GetNamespace(), name: md.GetName()})
		}
	}
	return out, nil
}

func (a *app) deleteOne(ctx context.Context, t target, o *deleteOptions) error {
	c, err := a.client(t.kind)
	if err != nil {
		return err
	}
	cctx, cancel := a.call(ctx)
	defer cancel()
	if o.confirm {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, confirmationAnnotation)
		if _, err := c.Patch(cctx, &metav1.PatchRequest{Namespace: t.ns, Name: t.name, Patch: &metav1.RawExtension{Raw: []byte(patch)}, PatchType: mergePatch}); err != nil {
			return a.notFoundOK(err, o)
		}
	}
	obj, err := c.Delete(cctx, &metav1.DeleteRequest{Namespace: t.ns, Name: t.name})
	if err != nil {
		return a.notFoundOK(err, o)
	}
	id := printer.KindName(t.kind) + "/" + t.name
	if fin := resource.Meta(obj).GetFinalizers(); len(fin) > 0 && !o.wait {
		fmt.Fprintf(a.opts.Out, "%s marked for deletion (finalizers %v)\n", id, fin)
		return nil
	}
	if o.wait {
		wctx, wcancel := withTimeout(ctx, o.timeout)
		defer wcancel()
		if err := waitGone(wctx, c, t.ns, t.name, id); err != nil {
			return err
		}
	}
	fmt.Fprintf(a.opts.Out, "%s deleted\n", id)
	return nil
}

func (a *app) notFoundOK(err error, o *deleteOptions) error {
	if o.ignoreNotFound && hubconn.IsNotFound(err) {
		return nil
	}
	return err
}

// waitGone waits until the object no longer exists, or ctx ends.
func waitGone(ctx context.Context, c resource.Client, ns, name, id string) error {
	cur, err := c.Get(ctx, &metav1.GetRequest{Namespace: ns, Name: name})
	if hubconn.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	gone := false
	req := &metav1.WatchRequest{Namespace: ns, FieldSelector: "metadata.name=" + name, ResourceVersion: resource.Meta(cur).GetResourceVersion()}
	err = watchEvents(ctx, c, req, func(e resource.Event) (bool, error) {
		gone = e.Type == "DELETED"
		return gone, nil
	})
	if err == nil && !gone {
		err = fmt.Errorf("timed out waiting for %s to be deleted", id)
	}
	return err
}
