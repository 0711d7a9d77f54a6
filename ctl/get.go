package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/ctl/hubconn"
	"github.com/trellis-dev/trellis/ctl/printer"
	"github.com/trellis-dev/trellis/ctl/resource"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// selection is what get, list, watch and describe select objects by.
type selection struct {
	all            bool
	labels, fields string
	output         string
	noHeaders      bool
	chunk          int64
	watch          bool
	timeout        time.Duration
}

func (s *selection) addFlags(cmd *cobra.Command, output bool) {
	f := cmd.Flags()
	f.BoolVarP(&s.all, "all-namespaces", "A", false, "all namespaces")
	f.StringVarP(&s.labels, "selector", "l", "", "label selector, e.g. env=prod,tier in (a,b)")
	f.StringVar(&s.fields, "field-selector", "", "field selector, e.g. spec.seedName=local")
	if output {
		f.StringVarP(&s.output, "output", "o", "", "output format: "+strings.Join(printer.Formats, ", ")+" (default table)")
		f.BoolVar(&s.noHeaders, "no-headers", false, "leave out table headers")
		_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "wide", "yaml", "json", "name", "jsonpath="}, cobra.ShellCompDirectiveNoFileComp))
	}
}

func (a *app) printer(w io.Writer, k *resource.Kind, s *selection) (*printer.Printer, error) {
	return printer.New(w, k, printer.Options{Format: s.output, AllNamespaces: s.all, NoHeaders: s.noHeaders, Now: a.opts.Now})
}

func (a *app) getCmd() *cobra.Command {
	var s selection
	cmd := &cobra.Command{
		Use:   "get TYPE[,TYPE...] [NAME...] | TYPE/NAME...",
		Short: "Show objects: a table of their columns, or YAML, JSON, names",
		Example: `  trellisctl get shoots -p dev
  trellisctl get shoots -A -o wide
  trellisctl get shoot local -n garden-local -o yaml
  trellisctl get seeds,projects
  trellisctl get shoots -A -l shoot.gardener.cloud/status=unhealthy -o name`,
		ValidArgsFunction: a.completeRefs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.get(cmd.Context(), args, &s)
		},
	}
	s.addFlags(cmd, true)
	cmd.Flags().BoolVarP(&s.watch, "watch", "w", false, "after printing, watch for changes")
	cmd.Flags().Int64Var(&s.chunk, "chunk-size", 500, "read lists in pages of this many objects (0: all at once)")
	return cmd
}

func (a *app) listCmd() *cobra.Command {
	var s selection
	cmd := &cobra.Command{
		Use:               "list TYPE",
		Short:             "List the objects of a type (get without names)",
		Example:           "  trellisctl list shoots -A\n  trellisctl list projects -o name",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeTypes,
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.Contains(args[0], "/") {
				return fmt.Errorf("list takes a type; use get for objects")
			}
			return a.get(cmd.Context(), args, &s)
		},
	}
	s.addFlags(cmd, true)
	cmd.Flags().Int64Var(&s.chunk, "chunk-size", 500, "read lists in pages of this many objects (0: all at once)")
	return cmd
}

func (a *app) get(ctx context.Context, args []string, s *selection) error {
	refs, err := a.parseRefs(args)
	if err != nil {
		return err
	}
	if s.watch && (len(refs) > 1 || len(refs[0].names) > 1) {
		return fmt.Errorf("--watch takes one type and at most one name")
	}
	var failed bool
	for i, r := range refs {
		if i > 0 && (s.output == "" || s.output == "table" || s.output == "wide") {
			fmt.Fprintln(a.opts.Out)
		}
		if err := a.getRef(ctx, r, s); err != nil {
			if len(r.names) == 0 {
				return err
			}
			printError(a.opts.Err, err)
			failed = true
		}
	}
	if failed {
		return errReported
	}
	return nil
}

func (a *app) getRef(ctx context.Context, r ref, s *selection) error {
	k := r.kind
	c, ns, err := a.scoped(ctx, k, s.all)
	if err != nil {
		return err
	}
	p, err := a.printer(a.opts.Out, k, s)
	if err != nil {
		return err
	}
	var objs []proto.Message
	var rv string
	var failed error
	if len(r.names) > 0 {
		for _, name := range r.names {
			cctx, cancel := a.call(ctx)
			obj, err := c.Get(cctx, &metav1.GetRequest{Namespace: ns, Name: name})
			cancel()
			if err != nil {
				printError(a.opts.Err, err)
				failed = errReported
				continue
			}
			objs = append(objs, obj)
			rv = resource.Meta(obj).GetResourceVersion()
		}
	} else {
		cctx, cancel := a.call(ctx)
		var meta *metav1.ListMeta
		objs, meta, err = list(cctx, c, &metav1.ListRequest{Namespace: ns, LabelSelector: s.labels, FieldSelector: s.fields, Limit: s.chunk})
		cancel()
		if err != nil {
			return err
		}
		rv = meta.GetResourceVersion()
		if len(objs) == 0 && !s.watch {
			a.noResources(ns, s)
		}
	}
	if len(objs) > 0 {
		if err := p.Print(objs, len(r.names) == 1); err != nil {
			return err
		}
	}
	if failed != nil || !s.watch {
		return failed
	}
	fields := s.fields
	if len(r.names) == 1 {
		fields = joinSelectors(fields, "metadata.name="+r.names[0])
	}
	return a.streamEvents(ctx, c, p, &metav1.WatchRequest{Namespace: ns, LabelSelector: s.labels, FieldSelector: fields, ResourceVersion: rv}, false)
}

func (a *app) noResources(ns string, s *selection) {
	switch {
	case s.output != "" && s.output != "table" && s.output != "wide":
	case ns != "":
		fmt.Fprintf(a.opts.Err, "No resources found in %s namespace.\n", ns)
	default:
		fmt.Fprintln(a.opts.Err, "No resources found")
	}
}

func joinSelectors(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}

func (a *app) watchCmd() *cobra.Command {
	var s selection
	cmd := &cobra.Command{
		Use:   "watch TYPE [NAME]",
		Short: "Stream the changes of objects: their current state, then every change",
		Long: `watch prints every object of the type (or the one named) as it is, then every change as it happens, with the
event (ADDED, MODIFIED, DELETED) in the first column; -o json prints one {"type","object"} line per event, -o yaml
one document per event. It runs until interrupted or --timeout, resuming after the hub closed the stream.`,
		Example:           "  trellisctl watch shoots -p local\n  trellisctl watch shoot local -n garden-local -o json --timeout 1m",
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: a.completeRefs,
		RunE: func(cmd *cobra.Command, args []string) error {
			refs, err := a.parseRefs(args)
			if err != nil {
				return err
			}
			if len(refs) != 1 || len(refs[0].names) > 1 {
				return fmt.Errorf("watch takes one type and at most one name")
			}
			k := refs[0].kind
			c, ns, err := a.scoped(cmd.Context(), k, s.all)
			if err != nil {
				return err
			}
			p, err := a.printer(a.opts.Out, k, &s)
			if err != nil {
				return err
			}
			fields := s.fields
			if len(refs[0].names) == 1 {
				fields = joinSelectors(fields, "metadata.name="+refs[0].names[0])
			}
			ctx, cancel := withTimeout(cmd.Context(), s.timeout)
			defer cancel()
			return a.streamEvents(ctx, c, p, &metav1.WatchRequest{Namespace: ns, LabelSelector: s.labels, FieldSelector: fields}, true)
		},
	}
	s.addFlags(cmd, true)
	cmd.Flags().DurationVar(&s.timeout, "timeout", 0, "stop after this long (0: run until interrupted)")
	return cmd
}

// streamEvents prints the events of a watch until ctx ends. When the hub ends the stream it resumes from the last
// version seen; when that version is too old (Expired) it starts over with the current state. withEvent prints the
// event type (watch); get -w prints rows alone, as kubectl does.
func (a *app) streamEvents(ctx context.Context, c resource.Client, p *printer.Printer, req *metav1.WatchRequest, withEvent bool) error {
	return watchEvents(ctx, c, req, func(e resource.Event) (bool, error) {
		if e.Type == "BOOKMARK" {
			return false, nil
		}
		typ := e.Type
		if !withEvent {
			typ = ""
		}
		return false, p.Event(typ, e.Object)
	})
}

// watchEvents calls fn with every event of a watch until fn returns done or an error, or ctx ends (nil). It resumes
// after the hub closed the stream (from the last resourceVersion seen) and starts over after Expired; other errors
// end it.
func watchEvents(ctx context.Context, c resource.Client, req *metav1.WatchRequest, fn func(resource.Event) (bool, error)) error {
	req.AllowWatchBookmarks = true
	for {
		w, err := c.Watch(ctx, req)
		if err != nil {
			if ended(ctx, err) {
				return nil
			}
			return err
		}
		for {
			e, err := w.Recv()
			if ended(ctx, err) {
				return nil
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if hubconn.Reason(err) == "Expired" {
				req.ResourceVersion = ""
				break
			}
			var unreachable *hubconn.UnreachableError
			if errors.As(err, &unreachable) {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(time.Second):
				}
				break
			}
			if err != nil {
				return err
			}
			if rv := resource.Meta(e.Object).GetResourceVersion(); rv != "" {
				req.ResourceVersion = rv
			}
			done, err := fn(e)
			if done || err != nil {
				return err
			}
		}
	}
}

// ended reports whether a watch ended because ctx did. The hub ends a call at the deadline it carried (gRPC sends it
// rounded down), which may be a moment before ctx's own timer: a Timeout error waits for ctx, briefly.
func ended(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	if hubconn.Reason(err) != "Timeout" {
		return false
	}
	select {
	case <-ctx.Done():
		return true
	case <-time.After(time.Second):
		return false
	}
}
