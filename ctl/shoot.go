package ctl

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/trellis-dev/trellis/ctl/printer"
	"github.com/trellis-dev/trellis/ctl/progress"
	"github.com/trellis-dev/trellis/ctl/resource"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// operationAnnotation is Gardener's annotation asking for an operation on a shoot.
const operationAnnotation = "gardener.cloud/operation"

// shootOp is one of the shoot commands that change the shoot: the merge patch it sends and what it says it did.
type shootOp struct {
	use, short, long string
	// patch returns the merge patch and the operation annotation it sets ("" for none).
	patch func(phase string) (string, string, error)
	done  string
	// phase, if set, is the credentials rotation phase the operation's success leads to, which --wait waits for.
	phase func(phase string) string
}

func annotate(value string) func(string) (string, string, error) {
	return func(string) (string, string, error) {
		return fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, operationAnnotation, value), value, nil
	}
}

var shootOps = []shootOp{
	{use: "reconcile", short: "Reconcile a shoot now (gardener.cloud/operation=reconcile)", patch: annotate("reconcile"), done: "annotated " + operationAnnotation + "=reconcile"},
	{use: "retry", short: "Retry a shoot's failed operation (gardener.cloud/operation=retry)", patch: annotate("retry"), done: "annotated " + operationAnnotation + "=retry"},
	{use: "maintain", short: "Maintain a shoot now, outside its window (gardener.cloud/operation=maintain)", patch: annotate("maintain"), done: "annotated " + operationAnnotation + "=maintain"},
	{use: "hibernate", short: "Hibernate a shoot (spec.hibernation.enabled=true)", patch: func(string) (string, string, error) {
		return `{"spec":{"hibernation":{"enabled":true}}}`, "", nil
	}, done: "hibernation requested"},
	{use: "wake-up", short: "Wake a hibernated shoot up (spec.hibernation.enabled=false)", patch: func(string) (string, string, error) {
		return `{"spec":{"hibernation":{"enabled":false}}}`, "", nil
	}, done: "wake-up requested"},
	{use: "rotate-credentials", short: "Rotate all of a shoot's credentials (gardener.cloud/operation=rotate-credentials-start|complete)",
		long: `rotate-credentials starts (--phase start) or completes (--phase complete) the rotation of all credentials of a shoot,
as Gardener's annotations rotate-credentials-start and rotate-credentials-complete do: start introduces new
credentials next to the old ones, complete removes the old ones once every client uses the new. With --wait it
follows the shoot until the rotation is Prepared (start) or Completed (complete); the hub refuses a start while a
rotation is not Completed and a complete before it is Prepared.`,
		patch: func(phase string) (string, string, error) {
			if phase != "start" && phase != "complete" {
				return "", "", fmt.Errorf("--phase is start or complete, not %q", phase)
			}
			return annotate("rotate-credentials-" + phase)(phase)
		},
		phase: func(phase string) string {
			if phase == "complete" {
				return "Completed"
			}
			return "Prepared"
		}, done: "annotated for the credentials rotation"},
}

func (a *app) shootCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shoot",
		Short: "Gardener's operations on shoots, and the progress of their operations",
	}
	for _, op := range shootOps {
		cmd.AddCommand(a.shootOpCmd(op))
	}
	var timeout time.Duration
	progressCmd := &cobra.Command{
		Use:   "progress NAME",
		Short: "Follow a shoot's operation live: percent, current step, errors",
		Long: `progress shows the shoot's last operation (type, state, percent, the step it is at) and its last errors, and
follows it until the operation ends: exit status 0 when it succeeded, 1 when it failed or was aborted.`,
		Example:           "  trellisctl shoot progress local -p local",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeShoots,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, c, ns, err := a.shoots(cmd.Context())
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), timeout)
			defer cancel()
			return a.follow(ctx, k, c, ns, args[0], nil)
		},
	}
	progressCmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: no limit)")
	cmd.AddCommand(progressCmd, a.shootKubeconfigCmd())
	return cmd
}

func (a *app) shootOpCmd(op shootOp) *cobra.Command {
	var wait bool
	var phase string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:               op.use + " NAME",
		Short:             op.short,
		Long:              op.long,
		Example:           fmt.Sprintf("  trellisctl shoot %s local -p local --wait", op.use),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeShoots,
		RunE: func(cmd *cobra.Command, args []string) error {
			patch, annotation, err := op.patch(phase)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			k, c, ns, err := a.shoots(ctx)
			if err != nil {
				return err
			}
			asked := a.opts.Now()
			cctx, cancel := a.call(ctx)
			defer cancel()
			obj, err := c.Patch(cctx, &metav1.PatchRequest{Namespace: ns, Name: args[0], Patch: &metav1.RawExtension{Raw: []byte(patch)}, PatchType: mergePatch})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.opts.Out, "%s %s\n", printer.Name(k, obj), op.done)
			if !wait {
				return nil
			}
			since := &progress.Since{Time: asked, Generation: resource.Meta(obj).GetGeneration(), Annotation: annotation, Phase: op.phaseOf(phase)}
			fctx, fcancel := withTimeout(ctx, timeout)
			defer fcancel()
			return a.follow(fctx, k, c, ns, args[0], since)
		},
	}
	cmd.Flags().BoolVarP(&wait, "wait", "w", false, "follow the operation's progress until it ends")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --wait, give up after this long (0: no limit)")
	if op.use == "rotate-credentials" {
		cmd.Flags().StringVar(&phase, "phase", "start", "start or complete")
	}
	return cmd
}

// phaseOf is the rotation phase op's success leads to, "" for operations that are no rotations.
func (op shootOp) phaseOf(phase string) string {
	if op.phase == nil {
		return ""
	}
	return op.phase(phase)
}

// shoots returns the Shoot kind, its client and the namespace of the command.
func (a *app) shoots(ctx context.Context) (*resource.Kind, resource.Client, string, error) {
	k, err := a.reg.Lookup("shoots.core.gardener.cloud")
	if err != nil {
		return nil, nil, "", err
	}
	c, ns, err := a.scoped(ctx, k, false)
	return k, c, ns, err
}

// follow shows the progress of the named object's operation until it ends (with since: an operation that started
// after since), ctx ends (an error) or the object is deleted.
func (a *app) follow(ctx context.Context, k *resource.Kind, c resource.Client, ns, name string, since *progress.Since) error {
	view := progress.NewView(a.opts.Out, terminalWidth(a.opts.Out), a.opts.Now)
	var outcome error
	ended := false
	err := watchEvents(ctx, c, &metav1.WatchRequest{Namespace: ns, FieldSelector: "metadata.name=" + name}, func(e resource.Event) (bool, error) {
		var s progress.State
		switch e.Type {
		case "DELETED":
			s.Deleted = true
		case "ADDED", "MODIFIED":
			v, err := printer.Value(e.Object)
			if err != nil {
				return false, err
			}
			s = progress.Of(v)
		default:
			return false, nil
		}
		view.Show(name, s)
		if since != nil && !since.Of(s) {
			return false, nil
		}
		done, ok := s.Final()
		if done && !ok {
			outcome = fmt.Errorf("%s/%s: %s %s", printer.KindName(k), name, s.Type, s.State)
		}
		ended = done
		return done, nil
	})
	if err != nil {
		return err
	}
	if !ended {
		if ctx.Err() == context.DeadlineExceeded {
			return fmt.Errorf("timed out following %s/%s", printer.KindName(k), name)
		}
		return ctx.Err()
	}
	return outcome
}

// withTimeout bounds ctx by d, if d is positive.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// terminalWidth returns the columns of the terminal w is, 0 when it is none (the progress view then prints lines).
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil || width <= 0 {
		return 80
	}
	return width
}
