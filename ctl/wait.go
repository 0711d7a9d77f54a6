package ctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/ctl/hubconn"
	"github.com/trellis-dev/trellis/ctl/printer"
	"github.com/trellis-dev/trellis/ctl/resource"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/jsonpath"
)

func (a *app) waitCmd() *cobra.Command {
	var forCond string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait TYPE NAME... | TYPE/NAME... --for=CONDITION",
		Short: "Wait until objects meet a condition",
		Long: `wait watches each object until it meets the condition, or fails after --timeout:
  --for=condition=TYPE[=STATUS]   status.conditions has TYPE with STATUS (default True), e.g. EveryNodeReady
  --for=jsonpath='{PATH}'=VALUE   the JSONPath selects VALUE, e.g. {.status.lastOperation.state}=Succeeded
  --for=delete                    the object is gone`,
		Example: `  trellisctl wait shoot local -p local --for=condition=APIServerAvailable --timeout=5m
  trellisctl wait seed/local --for=condition=GardenletReady
  trellisctl wait shoot local -p local --for=jsonpath='{.status.lastOperation.state}'=Succeeded`,
		ValidArgsFunction: a.completeRefs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cond, err := parseCondition(forCond)
			if err != nil {
				return err
			}
			refs, err := a.parseRefs(args)
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), timeout)
			defer cancel()
			for _, r := range refs {
				if len(r.names) == 0 {
					return fmt.Errorf("name the %s to wait for", r.kind.Resource)
				}
				for _, name := range r.names {
					if err := a.waitFor(ctx, r.kind, name, cond); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&forCond, "for", "", "condition=TYPE[=STATUS], jsonpath='{PATH}'=VALUE or delete")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	_ = cmd.MarkFlagRequired("for")
	return cmd
}

// condition is a parsed --for.
type condition struct {
	deleted bool
	path    *jsonpath.Path
	value   string
	text    string // for messages: "condition met", "deleted"
}

// parseCondition reads --for: delete, condition=TYPE[=STATUS] or jsonpath={PATH}=VALUE.
func parseCondition(s string) (condition, error) {
	switch {
	case s == "delete":
		return condition{deleted: true, text: "deleted"}, nil
	case strings.HasPrefix(s, "condition="):
		typ, status, ok := strings.Cut(strings.TrimPrefix(s, "condition="), "=")
		if !ok {
			status = "True"
		}
		if typ == "" {
			return condition{}, fmt.Errorf("--for=condition= needs a condition type")
		}
		p, err := jsonpath.Parse(fmt.Sprintf(".status.conditions[?(@.type==%q)].status", typ))
		if err != nil {
			return condition{}, err
		}
		return condition{path: p, value: status, text: "condition met"}, nil
	case strings.HasPrefix(s, "jsonpath="):
		expr := strings.TrimPrefix(s, "jsonpath=")
		i := strings.LastIndex(expr, "=")
		if !strings.HasPrefix(expr, "{") || i < 0 || !strings.HasSuffix(expr[:i], "}") {
			return condition{}, fmt.Errorf("--for=jsonpath= takes '{PATH}'=VALUE")
		}
		p, err := jsonpath.Parse(expr[:i])
		if err != nil {
			return condition{}, err
		}
		return condition{path: p, value: expr[i+1:], text: "condition met"}, nil
	}
	return condition{}, fmt.Errorf("--for takes condition=TYPE[=STATUS], jsonpath='{PATH}'=VALUE or delete, not %q", s)
}

func (c condition) met(obj proto.Message) bool {
	v, err := printer.Value(obj)
	if err != nil {
		return false
	}
	return jsonpath.Format(c.path.Eval(v)) == c.value
}

// waitFor watches one object until it meets the condition.
func (a *app) waitFor(ctx context.Context, k *resource.Kind, name string, cond condition) error {
	c, ns, err := a.scoped(ctx, k, false)
	if err != nil {
		return err
	}
	id := printer.KindName(k) + "/" + name
	if cond.deleted {
		if err := waitGone(ctx, c, ns, name, id); err != nil {
			return err
		}
		fmt.Fprintf(a.opts.Out, "%s deleted\n", id)
		return nil
	}
	met := false
	err = watchEvents(ctx, c, &metav1.WatchRequest{Namespace: ns, FieldSelector: "metadata.name=" + name}, func(e resource.Event) (bool, error) {
		switch e.Type {
		case "DELETED":
			return false, fmt.Errorf("%s was deleted", id)
		case "ADDED", "MODIFIED":
			met = cond.met(e.Object)
		}
		return met, nil
	})
	if err != nil {
		return err
	}
	if !met {
		if _, gerr := c.Get(context.WithoutCancel(ctx), &metav1.GetRequest{Namespace: ns, Name: name}); hubconn.IsNotFound(gerr) {
			return gerr
		}
		return fmt.Errorf("timed out waiting for the condition on %s", id)
	}
	fmt.Fprintf(a.opts.Out, "%s %s\n", id, cond.text)
	return nil
}
