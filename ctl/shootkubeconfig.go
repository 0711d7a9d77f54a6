package ctl

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	authenticationv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/authentication/v1alpha1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

func (a *app) shootKubeconfigCmd() *cobra.Command {
	var file string
	var viewer bool
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "kubeconfig NAME",
		Short: "Print a short-lived kubeconfig for a shoot's kube-apiserver (shoots/adminkubeconfig, viewerkubeconfig)",
		Long: `kubeconfig asks the hub for a kubeconfig of the shoot NAME, as Gardener's shoots/adminkubeconfig subresource
(or with --viewer shoots/viewerkubeconfig) issues it, and prints it (or writes it to --file, mode 0600). Its client
certificate is new, signed by the shoot's client CA, for your hub user in group system:masters (admin) or
gardener.cloud:system:viewers (viewer), valid for --duration (at least 10m; the hub's default is 1h and it shortens
what is longer than its maximum, 24h by default). The server is the hub's tunnel listener, which passes TLS through
to the shoot's kube-apiserver via its seed's agent.

Project owners and admins get admin kubeconfigs, viewers too get viewer ones.`,
		Example: "  trellisctl shoot kubeconfig local -p local -f /tmp/shoot.kubeconfig\n" +
			"  kubectl --kubeconfig /tmp/shoot.kubeconfig get namespaces\n" +
			"  trellisctl shoot kubeconfig local -n garden-local --viewer --duration 30m > viewer.kubeconfig",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeShoots,
		RunE: func(cmd *cobra.Command, args []string) error {
			if duration != 0 && duration < 10*time.Minute {
				return fmt.Errorf("--duration: at least 10m, got %s", duration)
			}
			_, _, ns, err := a.shoots(cmd.Context())
			if err != nil {
				return err
			}
			_, conn, err := a.connect()
			if err != nil {
				return err
			}
			md := &metav1.ObjectMeta{Name: args[0], Namespace: ns}
			spec := &authenticationv1alpha1.KubeconfigRequestSpec{}
			if duration != 0 {
				spec.ExpirationSeconds = proto.Int64(int64(duration / time.Second))
			}
			ctx, cancel := a.call(cmd.Context())
			defer cancel()
			c := authenticationv1alpha1.NewShootKubeconfigServiceClient(conn)
			var status *authenticationv1alpha1.KubeconfigRequestStatus
			if viewer {
				resp, err := c.CreateViewerKubeconfig(ctx, &authenticationv1alpha1.ViewerKubeconfigRequest{Metadata: md, Spec: spec})
				if err != nil {
					return err
				}
				status = resp.GetStatus()
			} else {
				resp, err := c.CreateAdminKubeconfig(ctx, &authenticationv1alpha1.AdminKubeconfigRequest{Metadata: md, Spec: spec})
				if err != nil {
					return err
				}
				status = resp.GetStatus()
			}
			if file == "" {
				_, err = a.opts.Out.Write(status.GetKubeconfig())
				return err
			}
			if err := os.WriteFile(file, status.GetKubeconfig(), 0o600); err != nil {
				return err
			}
			fmt.Fprintf(a.opts.Err, "wrote %s (valid until %s)\n", file, status.GetExpirationTimestamp().AsTime().Local().Format(time.RFC3339))
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "write the kubeconfig to this file (mode 0600) instead of printing it")
	cmd.Flags().StringVarP(&file, "output", "o", "", "the same as --file")
	cmd.Flags().BoolVar(&viewer, "viewer", false, "a viewer kubeconfig (read-only, group gardener.cloud:system:viewers) instead of an admin one")
	cmd.Flags().DurationVar(&duration, "duration", 0, "how long the kubeconfig is valid (at least 10m; default: the hub's, 1h)")
	return cmd
}
