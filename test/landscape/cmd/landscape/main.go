// Command landscape runs the local landscape of `make up` in the foreground: a hub, seeds with their agents and
// provider-local, and the example resources (package test/landscape), with everything under --dir (.trellis/local).
// Once everything is ready it writes <dir>/env (TRELLIS_HUB, TRELLIS_CA, TRELLIS_TOKEN, SEED_KUBECONFIG) and prints how
// to watch the example shoot. SIGINT or SIGTERM (Ctrl-C, `make down`) stops everything; a second start reuses the
// data. <dir>/landscape.pid holds its process id while it runs. It builds nothing: `make up` builds the binaries first.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trellis-dev/trellis/test/landscape"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("landscape", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".trellis/local", "directory of the landscape's data, configuration and logs")
	binDir := fs.String("bin-dir", "", "directory of trellis-hub, trellis-agent, localseed and provider-local (default: bin of the module root)")
	seeds := fs.String("seeds", landscape.DefaultSeedName, "comma-separated names of the seeds to run")
	examples := fs.Bool("examples", true, "apply the example resources (project local, cloud profile local, shoot local)")
	listen := fs.String("listen", "127.0.0.1:8443", "the hub's REST and gRPC address (port 0: a free port)")
	grpcListen := fs.String("grpc-listen", "127.0.0.1:8444", "the hub's gRPC address for agents (port 0: a free port)")
	tunnelListen := fs.String("tunnel-listen", "127.0.0.1:8445", "the hub's TLS-passthrough address of shoot API servers (empty: none)")
	node := fs.Bool("node", true, "run a real node in every seed (containerd, kubelet, kube-proxy, kube-scheduler, CoreDNS; needs root)")
	threshold := fs.Duration("extension-error-threshold", landscape.DefaultExtensionErrorThreshold, "how long the agents let an extension report an error before a shoot's flow fails")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := landscape.Config{
		Dir: *dir, BinDir: *binDir, Examples: *examples, HubListen: *listen, HubGRPCListen: *grpcListen, TunnelListen: *tunnelListen,
		ExtensionErrorThreshold: *threshold, Log: stdout, Node: *node,
	}
	for _, name := range strings.Split(*seeds, ",") {
		if name = strings.TrimSpace(name); name != "" {
			cfg.Seeds = append(cfg.Seeds, landscape.SeedConfig{Name: name})
		}
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		fmt.Fprintln(stderr, "landscape:", err)
		return 1
	}
	pidFile := filepath.Join(*dir, "landscape.pid")
	if pid, ok := runningPid(pidFile); ok {
		fmt.Fprintf(stderr, "landscape: already running in %s (pid %d); `make down` stops it\n", *dir, pid)
		return 1
	}
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		fmt.Fprintln(stderr, "landscape:", err)
		return 1
	}
	defer os.Remove(pidFile)

	ctx := stopOnSignal(stderr, pidFile)
	l, err := landscape.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	envFile := filepath.Join(l.Dir, "env")
	if err := writeEnv(envFile, l); err != nil {
		fmt.Fprintln(stderr, "landscape:", err)
		_ = l.Stop()
		return 1
	}
	printHelp(stdout, l, envFile, *examples)

	code := 0
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case err := <-l.Failures():
			fmt.Fprintf(stderr, "landscape: %v\n", err)
		}
	}
	fmt.Fprintln(stdout, "landscape: stopping")
	if err := l.Stop(); err != nil {
		fmt.Fprintln(stderr, "landscape:", err)
		code = 1
	}
	return code
}

// stopOnSignal returns a context that ends at the first SIGINT or SIGTERM. A second signal more than a second later
// ends the process at once (its children die with it: parent-death signal); one sooner is taken for the same request,
// as tools such as timeout(1) signal both the process and its group.
func stopOnSignal(stderr io.Writer, pidFile string) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		var first time.Time
		for sig := range sigs {
			switch {
			case first.IsZero():
				first = time.Now()
				cancel()
			case time.Since(first) > time.Second:
				fmt.Fprintf(stderr, "landscape: %v again: exiting now\n", sig)
				_ = os.Remove(pidFile)
				os.Exit(130)
			}
		}
	}()
	return ctx
}

// runningPid returns the process id in pidFile if that process runs.
func runningPid(pidFile string) (int, bool) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	err = syscall.Kill(pid, 0)
	return pid, err == nil || errors.Is(err, syscall.EPERM)
}

// writeEnv writes the shell assignments of the landscape: TRELLIS_HUB (host:port), TRELLIS_CA, TRELLIS_TOKEN for
// trellisctl, SEED_KUBECONFIG (the first seed's) for kubectl, and KUBECONFIG_<SEED> for each seed.
func writeEnv(path string, l *landscape.Landscape) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# The local landscape, written by `make up` at %s. Use: . %s\n", time.Now().Format(time.RFC3339), path)
	fmt.Fprintf(&b, "export TRELLIS_HUB=%s\n", l.HubAddr)
	fmt.Fprintf(&b, "export TRELLIS_CA=%s\n", shellQuote(l.CAFile))
	fmt.Fprintf(&b, "export TRELLIS_TOKEN=%s\n", shellQuote(l.Token))
	for i, s := range l.Seeds() {
		if i == 0 {
			fmt.Fprintf(&b, "export SEED_KUBECONFIG=%s\n", shellQuote(s.Kubeconfig))
		}
		fmt.Fprintf(&b, "export KUBECONFIG_%s=%s\n", envName(s.Name), shellQuote(s.Kubeconfig))
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// envName turns a seed name (a DNS label) into a shell variable suffix.
func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func printHelp(w io.Writer, l *landscape.Landscape, envFile string, examples bool) {
	rel := envFile
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, envFile); err == nil && !strings.HasPrefix(r, "..") {
			rel = r
		}
	}
	fmt.Fprintf(w, `
The local landscape runs (hub https://%s, logs in %s). In another shell:

  . %s
  bin/trellisctl get seeds -o yaml
`, l.HubAddr, l.LogDir, rel)
	if examples {
		fmt.Fprint(w, `  watch -n1 bin/trellisctl get shoot local -n garden-local -o yaml    # spec.seedName, status.lastOperation
  curl -sN --cacert "$TRELLIS_CA" -H "Authorization: Bearer $TRELLIS_TOKEN" \
    "https://$TRELLIS_HUB/apis/core.gardener.cloud/v1beta1/namespaces/garden-local/shoots?watch=true&fieldSelector=metadata.name=local"
  bin/trellisctl shoot kubeconfig local -n garden-local -o /tmp/shoot.kubeconfig    # the shoot's admin kubeconfig (1h)
  kubectl --kubeconfig /tmp/shoot.kubeconfig get namespaces    # the shoot, through the hub's tunnel (127.0.0.1:8445)
`)
	}
	fmt.Fprint(w, `  KUBECONFIG=$SEED_KUBECONFIG kubectl get namespaces    # the seed, if you have kubectl

Ctrl-C (or `+"`make down`"+`) stops everything; the next `+"`make up`"+` continues with the same data.
`)
	if !l.ProviderLocal {
		fmt.Fprint(w, "provider-local is not built: shoots are placed on a seed but do not progress.\n")
	}
}
