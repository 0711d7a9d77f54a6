package ctl

import (
	"crypto/rand"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// Bootstrap tokens as Kubernetes keeps them (k8s.io/cluster-bootstrap/token/api) and as the hub reads them
// (hub/auth: the description names the seed, see auth.SeedOfDescription; the CLI's test bootstraps an agent with
// the token to keep the two in step).
const (
	bootstrapTokenNamespace   = "kube-system"
	bootstrapTokenType        = "bootstrap.kubernetes.io/token"
	bootstrapTokenDescription = "A bootstrap token for the trellis-agent of seed %s."
	bootstrapTokenChars       = "abcdefghijklmnopqrstuvwxyz0123456789"
)

func (a *app) seedCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "seed", Short: "Operations on seeds"}
	bt := &cobra.Command{Use: "bootstrap-token", Short: "Bootstrap tokens of seed agents"}
	var validity time.Duration
	create := &cobra.Command{
		Use:   "create SEED",
		Short: "Create a bootstrap token for the agent of SEED and print it",
		Long: `create makes a bootstrap token <id>.<secret> for the trellis-agent of SEED (the Secret
kube-system/bootstrap-token-<id>, as Kubernetes and Gardener keep them) and prints it, for the agent's
hubClientConnection.bootstrapToken. The agent uses it once, to get its client certificate.`,
		Example:           "  trellisctl seed bootstrap-token create local --validity 1h",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeNamesOf("seeds.core.gardener.cloud"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if validity <= 0 {
				return fmt.Errorf("--validity: must be positive, got %s", validity)
			}
			k, err := a.reg.Lookup("secrets")
			if err != nil {
				return err
			}
			id, secret := randomToken(6), randomToken(16)
			secretJSON := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"bootstrap-token-%s","namespace":%q},"type":%q,"stringData":{"token-id":%q,"token-secret":%q,"usage-bootstrap-authentication":"true","usage-bootstrap-signing":"true","description":%q,"expiration":%q}}`,
				id, bootstrapTokenNamespace, bootstrapTokenType, id, secret, fmt.Sprintf(bootstrapTokenDescription, args[0]),
				a.opts.Now().Add(validity).UTC().Format(time.RFC3339))
			if _, err := a.create(cmd.Context(), k, []byte(secretJSON)); err != nil {
				return err
			}
			fmt.Fprintln(a.opts.Out, id+"."+secret)
			return nil
		},
	}
	create.Flags().DurationVar(&validity, "validity", time.Hour, "how long the token may be used")
	bt.AddCommand(create)
	cmd.AddCommand(bt, a.seedKubeconfigCmd())
	return cmd
}

// seedAPIPath is the hub's route to a seed's kube-apiserver through its agent (hub/tunnel.SeedAPIPrefix; the CLI
// does not import the hub, the tunnel tests use the command's kubeconfig to keep the two in step).
const seedAPIPath = "/tunnels/seeds/"

func (a *app) seedKubeconfigCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "kubeconfig SEED",
		Short: "Print a kubeconfig for SEED's kube-apiserver through the hub",
		Long: `kubeconfig prints (or writes to --file) a kubeconfig whose server is the hub's route to the kube-apiserver of
SEED, https://<hub>/tunnels/seeds/SEED, with the context's CA and token. The hub forwards each request through the
seed's agent, which impersonates the hub user on the seed, so the seed's RBAC applies. Only cluster admins of the
hub get a route (everyone else gets 403); a seed whose agent is not connected answers 503.`,
		Example:           "  trellisctl seed kubeconfig local > local.kubeconfig\n  kubectl --kubeconfig local.kubeconfig get nodes",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeNamesOf("seeds.core.gardener.cloud"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !dnsSubdomain.MatchString(args[0]) || len(args[0]) > 253 {
				return fmt.Errorf("SEED %q: not a seed name (a DNS subdomain: lower-case letters, digits, '-' and '.')", args[0])
			}
			target, _, err := a.connect()
			if err != nil {
				return err
			}
			out, err := seedKubeconfig(args[0], strings.TrimSuffix(target.Hub, "/")+seedAPIPath+args[0], target.CA, target.Token)
			if err != nil {
				return err
			}
			if file != "" {
				return os.WriteFile(file, out, 0o600)
			}
			_, err = a.opts.Out.Write(out)
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "write the kubeconfig to this file (mode 0600) instead of printing it")
	return cmd
}

// randomToken returns n random characters of [a-z0-9], as bootstrap token ids and secrets are made of.
func randomToken(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = bootstrapTokenChars[randIndex(len(bootstrapTokenChars))]
	}
	return string(b)
}

// randIndex returns a uniformly random index below n from crypto/rand.
func randIndex(n int) int {
	var buf [1]byte
	limit := 256 - 256%n
	for {
		if _, err := rand.Read(buf[:]); err != nil {
			panic(err) // crypto/rand.Read does not fail
		}
		if int(buf[0]) < limit {
			return int(buf[0]) % n
		}
	}
}

// dnsSubdomain is the form of seed names (Kubernetes' DNS-1123 subdomain, without the length).
var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// seedKubeconfig is a kubeconfig (clientcmd's v1 format, written without client-go, which trellisctl does not link)
// with one cluster, user and context named seed-<seed>.
func seedKubeconfig(seed, server string, ca []byte, token string) ([]byte, error) {
	name := "seed-" + seed
	type namedCluster struct {
		Name    string `json:"name"`
		Cluster struct {
			Server string `json:"server"`
			CAData []byte `json:"certificate-authority-data,omitempty"`
		} `json:"cluster"`
	}
	type namedUser struct {
		Name string `json:"name"`
		User struct {
			Token string `json:"token,omitempty"`
		} `json:"user"`
	}
	type namedContext struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	}
	c := namedCluster{Name: name}
	c.Cluster.Server, c.Cluster.CAData = server, ca
	u := namedUser{Name: name}
	u.User.Token = token
	x := namedContext{Name: name}
	x.Context.Cluster, x.Context.User = name, name
	return yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": name,
		"clusters": []namedCluster{c}, "users": []namedUser{u}, "contexts": []namedContext{x},
	})
}
