package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/trellis-dev/trellis/ctl/config"
	"github.com/trellis-dev/trellis/ctl/hubconn"
	"github.com/trellis-dev/trellis/ctl/resource"
)

// Options configure the command tree; Default fills what is unset from the process.
type Options struct {
	// Kinds are the kinds the CLI serves (kinds.All).
	Kinds []*resource.Kind
	// In, Out and Err are the standard streams.
	In       io.Reader
	Out, Err io.Writer
	// Getenv reads the environment (TRELLIS_*, TRELLISCONFIG, HOME, EDITOR).
	Getenv func(string) string
	// Now is the clock.
	Now func() time.Time
	// Version is the CLI's version.
	Version string
}

// Default fills unset fields with the process' streams, environment and clock.
func (o *Options) Default() {
	if o.In == nil {
		o.In = os.Stdin
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Err == nil {
		o.Err = os.Stderr
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Version == "" {
		o.Version = "devel"
	}
}

// app is the state one invocation shares between its commands: the global flags and, once a command needs it, the
// connection to the hub.
type app struct {
	opts Options
	reg  *resource.Registry

	configPath string
	overrides  config.Overrides
	timeout    time.Duration

	projectNS map[string]string

	once   sync.Once
	target config.Target
	conn   *grpc.ClientConn
	err    error
}

// errReported ends a command whose errors were already printed (one per object): Main only sets the exit code.
var errReported = errors.New("errors reported")

// Main runs trellisctl with args and returns the process' exit code: 0, or 1 after printing the error.
func Main(ctx context.Context, args []string, opts Options) int {
	opts.Default()
	root, a := newRoot(opts)
	defer a.close()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	printError(opts.Err, err)
	return 1
}

func newRoot(opts Options) (*cobra.Command, *app) {
	a := &app{opts: opts, reg: resource.NewRegistry(opts.Kinds)}
	root := &cobra.Command{
		Use:   "trellisctl",
		Short: "trellisctl controls a Trellis hub: Gardener's resources over gRPC",
		Long: `trellisctl controls a Trellis hub. It reads and writes Gardener's resources (projects, seeds, shoots, ...)
with the hub's typed gRPC services and shows them as Gardener's YAML and JSON.

The hub, its CA and the token come from the current context of the configuration file ($TRELLISCONFIG or
~/.trellis/config; see 'trellisctl login' and 'trellisctl config'), overridden by the environment variables
TRELLIS_HUB, TRELLIS_CA and TRELLIS_TOKEN, overridden by --hub, --ca and --token.`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	root.SetIn(opts.In)
	root.SetOut(opts.Out)
	root.SetErr(opts.Err)
	pf := root.PersistentFlags()
	pf.StringVar(&a.configPath, "trellisconfig", "", "configuration file (default $TRELLISCONFIG or ~/.trellis/config)")
	pf.StringVar(&a.overrides.Context, "context", "", "context of the configuration file to use")
	pf.StringVar(&a.overrides.Hub, "hub", "", "hub address, host:port or https://host:port (env TRELLIS_HUB)")
	pf.StringVar(&a.overrides.CA, "ca", "", "file with the hub's CA certificate (env TRELLIS_CA)")
	pf.StringVar(&a.overrides.Token, "token", "", "bearer token (env TRELLIS_TOKEN)")
	pf.StringVarP(&a.overrides.Namespace, "namespace", "n", "", "namespace of namespaced resources")
	pf.StringVarP(&a.overrides.Project, "project", "p", "", "project whose namespace to use (its spec.namespace)")
	pf.DurationVar(&a.timeout, "request-timeout", 0, "time limit of each request to the hub (0: none)")
	_ = root.RegisterFlagCompletionFunc("namespace", a.completeNamespaces)
	_ = root.RegisterFlagCompletionFunc("project", a.completeProjects)
	_ = root.RegisterFlagCompletionFunc("context", a.completeContexts)

	root.AddGroup(&cobra.Group{ID: "basic", Title: "Resources:"}, &cobra.Group{ID: "gardener", Title: "Gardener operations:"},
		&cobra.Group{ID: "settings", Title: "Settings:"})
	for _, c := range []*cobra.Command{a.getCmd(), a.listCmd(), a.describeCmd(), a.createCmd(), a.applyCmd(), a.editCmd(),
		a.patchCmd(), a.deleteCmd(), a.watchCmd(), a.waitCmd(), a.apiResourcesCmd()} {
		c.GroupID = "basic"
		root.AddCommand(c)
	}
	for _, c := range a.subresourceCmds() {
		c.GroupID = "basic"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.shootCmd(), a.seedCmd(), a.tokenCmd(), a.caRotationCmd()} {
		c.GroupID = "gardener"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.loginCmd(), a.configCmd(), a.versionCmd()} {
		c.GroupID = "settings"
		root.AddCommand(c)
	}
	root.SetHelpCommandGroupID("settings")
	root.SetCompletionCommandGroupID("settings")
	return root, a
}

// loadConfig reads the configuration file.
func (a *app) loadConfig() (*config.Config, string, error) {
	path := a.configPath
	if path == "" {
		path = config.Path(a.opts.Getenv)
	}
	c, err := config.Load(path)
	return c, path, err
}

// connect resolves the target and dials the hub, once per invocation.
func (a *app) connect() (config.Target, *grpc.ClientConn, error) {
	a.once.Do(func() {
		c, _, err := a.loadConfig()
		if err != nil {
			a.err = err
			return
		}
		if a.target, err = c.Resolve(a.overrides, a.opts.Getenv); err != nil {
			a.err = err
			return
		}
		a.conn, a.err = hubconn.Dial(a.target, "trellisctl/"+a.opts.Version)
	})
	return a.target, a.conn, a.err
}

func (a *app) close() {
	if a.conn != nil {
		_ = a.conn.Close()
	}
}

// client returns the client of a kind's service.
func (a *app) client(k *resource.Kind) (resource.Client, error) {
	_, conn, err := a.connect()
	if err != nil {
		return nil, err
	}
	return k.Client(conn), nil
}

// call bounds a unary request by --request-timeout.
func (a *app) call(ctx context.Context) (context.Context, context.CancelFunc) {
	if a.timeout > 0 {
		return context.WithTimeout(ctx, a.timeout)
	}
	return context.WithCancel(ctx)
}

// printError prints an error as kubectl does: the hub's errors as "Error from server (Reason): message".
func printError(w io.Writer, err error) {
	if errors.Is(err, errReported) {
		return
	}
	var se *hubconn.StatusError
	if errors.As(err, &se) {
		fmt.Fprintf(w, "Error from server (%s): %s\n", se.Reason(), se.Error())
		return
	}
	fmt.Fprintf(w, "error: %v\n", err)
}

// completionTimeout bounds the requests of shell completion, which a user waits for at a prompt.
const completionTimeout = 5 * time.Second
