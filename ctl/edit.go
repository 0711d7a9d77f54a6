package ctl

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/ctl/printer"
	"github.com/trellis-dev/trellis/ctl/resource"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/kjson"
)

const editHeader = `# Edit the object below and save to update it; exit without saving, or leave it unchanged, to cancel.
# Lines beginning with '#' are ignored. Changes of the status are not saved (it has its own subresource).
`

func (a *app) editCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "edit TYPE NAME | TYPE/NAME",
		Short: "Edit an object in $EDITOR and update it",
		Long: `edit opens the object as YAML (or JSON with -o json) in $TRELLIS_EDITOR, $EDITOR or vi, and updates it
with what was saved. The update carries the resourceVersion read, so a concurrent change makes it fail with a
Conflict instead of being overwritten. If the edited object is invalid or the update fails, the file is kept and
its path printed.`,
		Example:           "  EDITOR=nano trellisctl edit shoot local -p local",
		ValidArgsFunction: a.completeRefs,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, name, err := a.oneObject(args)
			if err != nil {
				return err
			}
			return a.edit(cmd.Context(), k, name, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "format to edit in: yaml or json")
	return cmd
}

func (a *app) edit(ctx context.Context, k *resource.Kind, name, format string) error {
	if format != "yaml" && format != "json" {
		return fmt.Errorf("edit takes -o yaml or json, not %q", format)
	}
	c, ns, err := a.scoped(ctx, k, false)
	if err != nil {
		return err
	}
	cctx, cancel := a.call(ctx)
	cur, err := c.Get(cctx, &metav1.GetRequest{Namespace: ns, Name: name})
	cancel()
	if err != nil {
		return err
	}
	doc, err := kjson.Marshal(cur)
	if err != nil {
		return err
	}
	text := []byte(editHeader)
	if format == "yaml" {
		y, err := yaml.JSONToYAML(doc)
		if err != nil {
			return err
		}
		text = append(text, y...)
	} else {
		if text, err = printer.IndentJSON(doc); err != nil { // JSON has no comments: no header
			return err
		}
	}
	f, err := os.CreateTemp("", "trellisctl-edit-*."+format)
	if err != nil {
		return err
	}
	path := f.Name()
	_, err = f.Write(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	keep := func(err error) error {
		return fmt.Errorf("%w\nyour changes are in %s", err, path)
	}
	if err := a.runEditor(ctx, path); err != nil {
		os.Remove(path)
		return err
	}
	edited, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	j, err := yaml.YAMLToJSON(edited)
	if err != nil {
		return keep(err)
	}
	if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
		os.Remove(path)
		fmt.Fprintln(a.opts.Err, "Edit cancelled, the file is empty.")
		return nil
	}
	obj, err := decode(k, j)
	if err != nil {
		return keep(err)
	}
	if proto.Equal(obj, cur) {
		os.Remove(path)
		fmt.Fprintln(a.opts.Err, "Edit cancelled, no changes made.")
		return nil
	}
	if md := resource.Meta(obj); md.GetName() != name || md.GetNamespace() != ns {
		return keep(fmt.Errorf("the name and namespace of the object cannot be changed"))
	}
	cctx, cancel = a.call(ctx)
	defer cancel()
	updated, err := c.Update(cctx, obj)
	if err != nil {
		return keep(err)
	}
	os.Remove(path)
	fmt.Fprintf(a.opts.Out, "%s edited\n", printer.Name(k, updated))
	return nil
}

// runEditor runs the user's editor on path with the command's streams. The editor variable may hold arguments
// ("code --wait"), so it runs through the shell.
func (a *app) runEditor(ctx context.Context, path string) error {
	editor := a.opts.Getenv("TRELLIS_EDITOR")
	if editor == "" {
		editor = a.opts.Getenv("EDITOR")
	}
	if editor == "" {
		editor = "vi"
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", editor+` "$1"`, "trellisctl-editor", filepath.Clean(path))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.opts.In, a.opts.Out, a.opts.Err
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("editor %q: %w", editor, err)
	}
	return nil
}
