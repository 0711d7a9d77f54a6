package ctl

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/ctl/resource"
)

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print trellisctl's version",
		Args:  cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			fmt.Fprintf(a.opts.Out, "trellisctl %s (%s, %s/%s)\n", a.opts.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}

func (a *app) apiResourcesCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "api-resources",
		Short: "List the resources the CLI knows and the hub serves",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			kinds := append([]*resource.Kind(nil), a.reg.Kinds()...)
			sort.SliceStable(kinds, func(i, j int) bool { return kinds[i].Resource < kinds[j].Resource })
			if output == "name" {
				for _, k := range kinds {
					fmt.Fprintf(a.opts.Out, "%s.%s.%s\n", k.Resource, k.Version, k.Group)
				}
				return nil
			}
			if output != "" && output != "wide" {
				return fmt.Errorf("api-resources takes -o name or wide")
			}
			tw := tabwriter.NewWriter(a.opts.Out, 0, 8, 3, ' ', 0)
			head := "NAME\tSHORTNAMES\tAPIVERSION\tNAMESPACED\tKIND"
			if output == "wide" {
				head += "\tSUBRESOURCES"
			}
			fmt.Fprintln(tw, head)
			for _, k := range kinds {
				line := fmt.Sprintf("%s\t%s\t%s\t%v\t%s", k.Resource, strings.Join(k.ShortNames, ","), k.APIVersion(), k.Namespaced, k.Kind)
				if output == "wide" {
					var subs []string
					for _, s := range k.Subresources {
						subs = append(subs, s.Command)
					}
					line += "\t" + strings.Join(subs, ",")
				}
				fmt.Fprintln(tw, line)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "name or wide")
	return cmd
}
