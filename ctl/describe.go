package ctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/ctl/printer"
	"github.com/trellis-dev/trellis/ctl/resource"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func (a *app) describeCmd() *cobra.Command {
	var s selection
	cmd := &cobra.Command{
		Use:   "describe TYPE [NAME...] | TYPE/NAME...",
		Short: "Show objects in detail, with the events about them",
		Example: `  trellisctl describe shoot local -p local
  trellisctl describe seeds`,
		ValidArgsFunction: a.completeRefs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			refs, err := a.parseRefs(args)
			if err != nil {
				return err
			}
			first := true
			for _, r := range refs {
				objs, err := a.selected(ctx, r, &s)
				if err != nil {
					return err
				}
				for _, o := range objs {
					if !first {
						fmt.Fprintln(a.opts.Out)
					}
					first = false
					if err := printer.Describe(a.opts.Out, r.kind, o, a.eventsAbout(ctx, r.kind, o), a.opts.Now()); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	s.addFlags(cmd, false)
	return cmd
}

// selected returns the named objects of a ref, or those its selectors select.
func (a *app) selected(ctx context.Context, r ref, s *selection) ([]proto.Message, error) {
	c, ns, err := a.scoped(ctx, r.kind, s.all)
	if err != nil {
		return nil, err
	}
	cctx, cancel := a.call(ctx)
	defer cancel()
	if len(r.names) == 0 {
		objs, _, err := list(cctx, c, &metav1.ListRequest{Namespace: ns, LabelSelector: s.labels, FieldSelector: s.fields, Limit: 500})
		if err == nil && len(objs) == 0 {
			a.noResources(ns, s)
		}
		return objs, err
	}
	var objs []proto.Message
	for _, name := range r.names {
		o, err := c.Get(cctx, &metav1.GetRequest{Namespace: ns, Name: name})
		if err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// eventsAbout lists the Events whose involvedObject is o; nothing when they cannot be read.
func (a *app) eventsAbout(ctx context.Context, k *resource.Kind, o proto.Message) []proto.Message {
	ek, err := a.reg.Lookup("events")
	if err != nil || ek.Group != "" {
		return nil
	}
	c, err := a.client(ek)
	if err != nil {
		return nil
	}
	md := resource.Meta(o)
	sel := []string{"involvedObject.kind=" + k.Kind, "involvedObject.name=" + md.GetName()}
	if k.Namespaced {
		sel = append(sel, "involvedObject.namespace="+md.GetNamespace())
	}
	cctx, cancel := a.call(ctx)
	defer cancel()
	events, _, err := list(cctx, c, &metav1.ListRequest{Namespace: md.GetNamespace(), FieldSelector: strings.Join(sel, ","), Limit: 500})
	if err != nil {
		return nil
	}
	return events
}
