package ctl

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/ctl/config"
	"github.com/trellis-dev/trellis/ctl/hubconn"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func (a *app) configCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show and change the configuration file's contexts (like kubectl config)",
		Long: `config reads and writes the configuration file ($TRELLISCONFIG, or ~/.trellis/config; --trellisconfig picks
another): named contexts, each a hub address, its CA, a token and a default namespace or project, and the current
context. The environment variables TRELLIS_HUB, TRELLIS_CA and TRELLIS_TOKEN override the current context.`,
	}
	var raw bool
	view := &cobra.Command{
		Use:   "view",
		Short: "Print the configuration (tokens and CA data hidden unless --raw)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			c, _, err := a.loadConfig()
			if err != nil {
				return err
			}
			y, err := yaml.Marshal(c)
			if err != nil {
				return err
			}
			if !raw {
				y, err = redact(y)
				if err != nil {
					return err
				}
			}
			_, err = a.opts.Out.Write(y)
			return err
		},
	}
	view.Flags().BoolVar(&raw, "raw", false, "print tokens and CA data")
	getContexts := &cobra.Command{
		Use:   "get-contexts",
		Short: "List the contexts; * marks the current one",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			c, _, err := a.loadConfig()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.opts.Out, 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "CURRENT\tNAME\tHUB\tNAMESPACE\tPROJECT")
			for _, ctx := range c.Contexts {
				cur := ""
				if ctx.Name == c.CurrentContext {
					cur = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cur, ctx.Name, ctx.Hub, ctx.Namespace, ctx.Project)
			}
			return tw.Flush()
		},
	}
	current := &cobra.Command{
		Use:   "current-context",
		Short: "Print the current context's name",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			c, _, err := a.loadConfig()
			if err != nil {
				return err
			}
			if c.CurrentContext == "" {
				return fmt.Errorf("no current context is set")
			}
			fmt.Fprintln(a.opts.Out, c.CurrentContext)
			return nil
		},
	}
	use := &cobra.Command{
		Use:               "use-context NAME",
		Short:             "Make a context the current one",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeContexts,
		RunE: func(_ *cobra.Command, args []string) error {
			return a.updateConfig(func(c *config.Config) (string, error) {
				if _, ok := c.Context(args[0]); !ok {
					return "", fmt.Errorf("no context %q", args[0])
				}
				c.CurrentContext = args[0]
				return fmt.Sprintf("Switched to context %q.", args[0]), nil
			})
		},
	}
	var embed, makeCurrent bool
	set := &cobra.Command{
		Use:   "set-context NAME [--hub ADDRESS] [--ca FILE [--embed-ca]] [--token TOKEN] [-n NAMESPACE | -p PROJECT]",
		Short: "Create a context, or change the settings given of an existing one",
		Example: `  trellisctl config set-context local --hub 127.0.0.1:8443 --ca .trellis/local/hub/pki/ca.crt --embed-ca --current
  trellisctl config set-context local -p local`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeContexts,
		RunE: func(_ *cobra.Command, args []string) error {
			return a.updateConfig(func(c *config.Config) (string, error) {
				ctx := config.Context{Name: args[0]}
				verb := "created"
				if old, ok := c.Context(args[0]); ok {
					ctx, verb = *old, "modified"
				}
				if err := a.applyOverrides(&ctx, embed); err != nil {
					return "", err
				}
				c.SetContext(ctx)
				if makeCurrent {
					c.CurrentContext = ctx.Name
				}
				return fmt.Sprintf("Context %q %s.", ctx.Name, verb), nil
			})
		},
	}
	set.Flags().BoolVar(&embed, "embed-ca", false, "store the CA certificate itself, not the file's path")
	set.Flags().BoolVar(&makeCurrent, "current", false, "make it the current context")
	del := &cobra.Command{
		Use:               "delete-context NAME",
		Short:             "Delete a context",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeContexts,
		RunE: func(_ *cobra.Command, args []string) error {
			return a.updateConfig(func(c *config.Config) (string, error) {
				if !c.DeleteContext(args[0]) {
					return "", fmt.Errorf("no context %q", args[0])
				}
				return fmt.Sprintf("Deleted context %q.", args[0]), nil
			})
		},
	}
	cmd.AddCommand(view, getContexts, current, use, set, del)
	return cmd
}

// updateConfig loads the configuration, changes it with fn, saves it and prints fn's message.
func (a *app) updateConfig(fn func(*config.Config) (string, error)) error {
	c, path, err := a.loadConfig()
	if err != nil {
		return err
	}
	msg, err := fn(c)
	if err != nil {
		return err
	}
	if err := c.Save(path); err != nil {
		return err
	}
	fmt.Fprintln(a.opts.Out, msg)
	return nil
}

// applyOverrides sets the settings the flags gave (--hub, --ca, --token, -n, -p) on a context.
func (a *app) applyOverrides(ctx *config.Context, embed bool) error {
	o := a.overrides
	if o.Hub != "" {
		hub, err := config.NormalizeHub(o.Hub)
		if err != nil {
			return err
		}
		ctx.Hub = hub
	}
	if o.CA != "" {
		if embed {
			pem, err := os.ReadFile(o.CA)
			if err != nil {
				return err
			}
			ctx.CertificateAuthority, ctx.CertificateAuthorityData = "", pem
		} else {
			ctx.CertificateAuthority, ctx.CertificateAuthorityData = o.CA, nil
		}
	}
	if o.Token != "" {
		ctx.Token = o.Token
	}
	if o.Namespace != "" && o.Project != "" {
		return fmt.Errorf("--namespace and --project exclude each other")
	}
	if o.Namespace != "" {
		ctx.Namespace, ctx.Project = o.Namespace, ""
	}
	if o.Project != "" {
		ctx.Namespace, ctx.Project = "", o.Project
	}
	return nil
}

func (a *app) loginCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "login [--hub ADDRESS] [--ca FILE] [--token TOKEN] [--context NAME] [-n NAMESPACE | -p PROJECT]",
		Short: "Check credentials with the hub and save them as a context",
		Long: `login checks that the hub accepts the token, then saves hub, CA (embedded in the file) and token as a context
(--context, default the hub's host:port) and makes it the current one. Hub, CA and token default to TRELLIS_HUB,
TRELLIS_CA and TRELLIS_TOKEN, so after '. .trellis/local/env' a plain 'trellisctl login' saves the local landscape.`,
		Example: `  trellisctl login --hub hub.example.com:8443 --ca ca.crt --token "$TOKEN" -p dev
  . .trellis/local/env && trellisctl login --context local`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := &a.overrides
			for _, v := range []struct {
				flag *string
				env  string
			}{{&o.Hub, "TRELLIS_HUB"}, {&o.CA, "TRELLIS_CA"}, {&o.Token, "TRELLIS_TOKEN"}} {
				if *v.flag == "" {
					*v.flag = a.opts.Getenv(v.env)
				}
			}
			if o.Hub == "" || o.Token == "" {
				return fmt.Errorf("login needs --hub and --token (or TRELLIS_HUB and TRELLIS_TOKEN)")
			}
			name := o.Context
			hub, err := config.NormalizeHub(o.Hub)
			if err != nil {
				return err
			}
			if name == "" {
				name = strings.TrimPrefix(hub, "https://")
			}
			o.Context = "" // the context is being written, not read
			if err := a.checkCredentials(cmd.Context()); err != nil {
				return err
			}
			return a.updateConfig(func(c *config.Config) (string, error) {
				ctx := config.Context{Name: name}
				if err := a.applyOverrides(&ctx, true); err != nil {
					return "", err
				}
				c.SetContext(ctx)
				c.CurrentContext = name
				return fmt.Sprintf("Logged in to %s; context %q is the current context.", hub, name), nil
			})
		},
	}
}

// checkCredentials asks the hub for one project: an answer, or Forbidden, means the hub knows the token.
func (a *app) checkCredentials(ctx context.Context) error {
	k, err := a.reg.Lookup("projects.core.gardener.cloud")
	if err != nil {
		return err
	}
	c, err := a.client(k)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, completionTimeout*3)
	defer cancel()
	_, _, err = c.List(cctx, &metav1.ListRequest{Limit: 1})
	if err != nil && !hubconn.IsForbidden(err) {
		return err
	}
	return nil
}

// redact replaces the tokens and CA data of a configuration's YAML, as kubectl config view does.
func redact(y []byte) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(y, &doc); err != nil {
		return nil, err
	}
	contexts, _ := doc["contexts"].([]any)
	for _, c := range contexts {
		ctx, _ := c.(map[string]any)
		for key, mark := range map[string]string{"token": "REDACTED", "certificate-authority-data": "DATA+OMITTED"} {
			if _, ok := ctx[key]; ok {
				ctx[key] = mark
			}
		}
	}
	return yaml.Marshal(doc)
}
