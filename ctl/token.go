package ctl

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-dev/trellis/ctl/printer"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
	"github.com/trellis-dev/trellis/proto/jsonpath"
)

// userTokenNamespace holds the AccessTokens of users; robot tokens live in their service account's namespace.
const userTokenNamespace = "trellis-system"

func (a *app) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create and revoke access tokens (AccessTokens: users' and robots' bearer tokens)",
		Long: `token creates and revokes AccessTokens (auth.trellis.dev/v1alpha1). A user token (--user) lives in namespace
trellis-system and is for cluster admins to create; a robot token (--service-account) authenticates as a
ServiceAccount of a project's namespace (-p/-n). The hub returns the token once, when it is created: create prints
it and nothing else (or the whole AccessToken with -o yaml|json). List them with 'trellisctl get accesstokens'.`,
	}
	var user, sa, description, output string
	var groups []string
	var expiresIn time.Duration
	create := &cobra.Command{
		Use:   "create [NAME] (--user USER [--group GROUP]... | --service-account NAME)",
		Short: "Create an access token and print it",
		Example: `  trellisctl token create --user alice@example.com --group dev-team --expires-in 720h
  trellisctl token create ci -p dev --service-account ci --description "CI pipeline"`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := a.reg.Lookup("accesstokens.auth.trellis.dev")
			if err != nil {
				return err
			}
			spec := map[string]any{}
			md := map[string]any{}
			switch {
			case (user == "") == (sa == ""):
				return fmt.Errorf("give --user or --service-account")
			case user != "":
				if a.overrides.Namespace != "" && a.overrides.Namespace != userTokenNamespace || a.overrides.Project != "" {
					return fmt.Errorf("user tokens live in namespace %s", userTokenNamespace)
				}
				spec["user"], md["namespace"] = user, userTokenNamespace
				if len(groups) > 0 {
					spec["groups"] = groups
				}
			default:
				if len(groups) > 0 {
					return fmt.Errorf("--group is for user tokens")
				}
				ns, err := a.namespace(cmd.Context(), k, false)
				if err != nil {
					return err
				}
				spec["serviceAccountName"], md["namespace"] = sa, ns
			}
			if len(args) == 1 {
				md["name"] = args[0]
			} else {
				md["generateName"] = "token-"
			}
			if description != "" {
				spec["description"] = description
			}
			if expiresIn > 0 {
				spec["expirationSeconds"] = int64(expiresIn / time.Second)
			}
			body, err := json.Marshal(map[string]any{"apiVersion": k.APIVersion(), "kind": k.Kind, "metadata": md, "spec": spec})
			if err != nil {
				return err
			}
			created, err := a.create(cmd.Context(), k, body)
			if err != nil {
				return err
			}
			if output != "" {
				return a.printObjects(k, output, []proto.Message{created})
			}
			v, err := printer.Value(created)
			if err != nil {
				return err
			}
			token := jsonpath.Format(jsonpath.MustParse(".status.token").Eval(v))
			if token == "" {
				return fmt.Errorf("the hub returned no token for %s", printer.Name(k, created))
			}
			fmt.Fprintln(a.opts.Out, token)
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&user, "user", "", "the user a user token authenticates as")
	f.StringArrayVar(&groups, "group", nil, "a group of the user token's user (repeatable)")
	f.StringVar(&sa, "service-account", "", "the ServiceAccount a robot token authenticates as")
	f.StringVar(&description, "description", "", "what the token is for")
	f.DurationVar(&expiresIn, "expires-in", 0, "lifetime, e.g. 720h (default: the hub's default lifetime)")
	f.StringVarP(&output, "output", "o", "", "print the created AccessToken as yaml or json instead of the token")
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke an access token: it stops authenticating for good (spec.revoked=true)",
		Long: `revoke sets spec.revoked=true on the AccessToken: the hub refuses the token from then on, telling its holder
that it was revoked. User tokens are in namespace trellis-system (-n trellis-system).`,
		Example:           "  trellisctl token revoke token-x7k2p -n trellis-system\n  trellisctl token revoke ci -p dev",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeNamesOf("accesstokens.auth.trellis.dev"),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := a.reg.Lookup("accesstokens.auth.trellis.dev")
			if err != nil {
				return err
			}
			c, ns, err := a.scoped(cmd.Context(), k, false)
			if err != nil {
				return err
			}
			cctx, cancel := a.call(cmd.Context())
			defer cancel()
			obj, err := c.Patch(cctx, &metav1.PatchRequest{Namespace: ns, Name: args[0], Patch: &metav1.RawExtension{Raw: []byte(`{"spec":{"revoked":true}}`)}, PatchType: mergePatch})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.opts.Out, "%s revoked\n", printer.Name(k, obj))
			return nil
		},
	}
	cmd.AddCommand(create, revoke)
	return cmd
}
