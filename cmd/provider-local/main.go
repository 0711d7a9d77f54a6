// Command provider-local runs the local provider (package extsdk/provider/local) against a seed: it serves spec.type
// "local" for every extension kind, making ConfigMaps, Secrets, Services and backup directories instead of cloud
// resources. It installs nothing: it waits until the agent has installed the extension CRDs, then reconciles until
// SIGTERM or SIGINT. docs/provider-local.md describes the outputs, the flags and the failure-injection annotations.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/trellis-dev/trellis/tracing"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	extensionsv1alpha1 "github.com/trellis-dev/trellis/extsdk/apis/extensions/v1alpha1"
	"github.com/trellis-dev/trellis/extsdk/controller"
	"github.com/trellis-dev/trellis/extsdk/healthcheck"
	"github.com/trellis-dev/trellis/extsdk/heartbeat"
	"github.com/trellis-dev/trellis/extsdk/provider/local"
)

// defaultNamespace is the extension's namespace without --namespace and POD_NAMESPACE.
const defaultNamespace = "extension-provider-local"

// crdResources are the resources of the extension CRDs provider-local needs served before it starts.
var crdResources = []string{"backupbuckets", "backupentries", "bastions", "clusters", "containerruntimes", "controlplanes",
	"dnsrecords", "extensions", "infrastructures", "networks", "operatingsystemconfigs", "workers"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

// options are the command line.
type options struct {
	kubeconfig, logLevel, logFormat, metricsAddr, probeAddr string
	cfg                                                     local.Config
	tracing                                                 tracing.Config
}

func parse(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("provider-local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	namespace := os.Getenv("POD_NAMESPACE")
	if namespace == "" {
		namespace = defaultNamespace
	}
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the seed (default: $KUBECONFIG, then in-cluster, then ~/.kube/config)")
	fs.StringVar(&o.cfg.Namespace, "namespace", namespace, "the extension's namespace, where the heartbeat Lease is renewed; defaults to $POD_NAMESPACE when set")
	fs.StringVar(&o.cfg.BackupDir, "backup-dir", filepath.Join(os.TempDir(), "provider-local", "backupbuckets"), "root directory of the backup buckets")
	fs.StringVar(&o.cfg.DNSNamespace, "dns-namespace", local.DefaultDNSNamespace, "namespace of the CoreDNS ConfigMap with the DNS records' entries")
	fs.DurationVar(&o.cfg.HealthCheckInterval, "health-check-interval", healthcheck.DefaultSyncPeriod, "period of the health checks")
	fs.DurationVar(&o.cfg.HeartbeatInterval, "heartbeat-interval", heartbeat.DefaultRenewInterval, "renew interval of the heartbeat Lease")
	fs.IntVar(&o.cfg.MaxConcurrentReconciles, "max-concurrent-reconciles", controller.DefaultMaxConcurrentReconciles, "objects reconciled at once per kind and type")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "address of the metrics endpoint; 0 disables it")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", "0", "address of /healthz and /readyz; 0 disables them")
	fs.Func("extra-type", "serve Kind=type besides local, e.g. OperatingSystemConfig=gardenlinux (repeatable; commas allowed)", func(v string) error {
		for _, pair := range strings.Split(v, ",") {
			kind, typ, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok || kind == "" || typ == "" {
				return fmt.Errorf("%q: want Kind=type", pair)
			}
			if !slices.Contains(local.Kinds(), kind) {
				return fmt.Errorf("%q: unknown kind (known: %s)", kind, strings.Join(local.Kinds(), ", "))
			}
			if o.cfg.ExtraTypes == nil {
				o.cfg.ExtraTypes = map[string][]string{}
			}
			o.cfg.ExtraTypes[kind] = append(o.cfg.ExtraTypes[kind], typ)
		}
		return nil
	})
	var machineURL, machineTokenFile string
	fs.StringVar(&machineURL, "machine-provider-url", "", "URL of the local machine provider's API (test/localmachine); machines become real Nodes. Empty: Services stand in for machines")
	fs.StringVar(&machineTokenFile, "machine-provider-token-file", "", "file holding the bearer token of the machine provider's API")
	o.tracing.AddFlags(fs)
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "json or text")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if machineURL != "" {
		token, err := os.ReadFile(machineTokenFile)
		if err != nil {
			return nil, fmt.Errorf("--machine-provider-token-file: %w", err)
		}
		o.cfg.MachineProvider = &local.MachineProvider{URL: machineURL, Token: strings.TrimSpace(string(token))}
	}
	if err := o.cfg.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// run runs provider-local until ctx is done; it returns the exit code: 2 for a bad command line, 1 for a failure.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "provider-local: %v\n", err)
		return 2
	}
	logger, err := newLogger(stderr, o.logLevel, o.logFormat)
	if err != nil {
		fmt.Fprintf(stderr, "provider-local: %v\n", err)
		return 2
	}
	if err := serve(ctx, o, logger); err != nil {
		logger.Error("provider-local stopped", "err", err)
		return 1
	}
	return 0
}

// serve waits for the CRDs, then runs the manager until ctx is done.
func serve(ctx context.Context, o *options, logger *slog.Logger) error {
	log := logr.FromSlogHandler(logger.Handler())
	logf.SetLogger(log) // informers log through controller-runtime's global logger
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	if err := waitForCRDs(ctx, cfg, logger); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := extensionsv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	o.tracing.ServiceName = "provider-local"
	stopTracing, err := tracing.Setup(ctx, o.tracing)
	if err != nil {
		return err
	}
	defer func() { _ = stopTracing(context.Background()) }()
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress: o.probeAddr,
		Controller:             ctrlconfig.Controller{RecoverPanic: new(true)},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if o.probeAddr != "0" {
		if err := mgr.AddHealthzCheck("ping", func(*http.Request) error { return nil }); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("ping", func(*http.Request) error { return nil }); err != nil {
			return err
		}
	}
	if err := local.Add(mgr, o.cfg); err != nil {
		return err
	}
	if err := ensureNamespace(ctx, mgr.GetAPIReader(), mgr.GetClient(), o.cfg.Namespace); err != nil {
		logger.Warn("Cannot make sure the extension's namespace exists; the heartbeat needs it", "namespace", o.cfg.Namespace, "err", err)
	}
	logger.Info("Starting provider-local", "namespace", o.cfg.Namespace, "backupDir", o.cfg.BackupDir,
		"dnsNamespace", o.cfg.DNSNamespace, "extraTypes", o.cfg.ExtraTypes)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	logger.Info("Stopped")
	return nil
}

// Client-side rate limits of the seed client.
const (
	seedQPS   = 100
	seedBurst = 130
)

// restConfig is the seed's config from path, else controller-runtime's defaults ($KUBECONFIG, in-cluster,
// ~/.kube/config).
func restConfig(path string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if path != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	} else {
		cfg, err = config.GetConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("seed kubeconfig: %w", err)
	}
	cfg.UserAgent = "provider-local"
	// client-go's default of 5 requests/s throttles a seed with a few shoots to a crawl; Gardener's extensions and
	// gardenlet run with these limits.
	cfg.QPS, cfg.Burst = seedQPS, seedBurst
	return cfg, nil
}

// waitForCRDs waits until the seed serves every extension resource provider-local needs; the agent installs them.
// It asks discovery twice a second and says what it waits for every ten seconds.
func waitForCRDs(ctx context.Context, cfg *rest.Config, logger *slog.Logger) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	gv := extensionsv1alpha1.SchemeGroupVersion.String()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var lastLog time.Time
	for {
		missing := slices.Clone(crdResources)
		list, err := dc.ServerResourcesForGroupVersion(gv)
		if err == nil {
			for _, r := range list.APIResources {
				missing = slices.DeleteFunc(missing, func(m string) bool { return m == r.Name })
			}
		} else if !apierrors.IsNotFound(err) {
			logger.Warn("Discovery failed", "err", err)
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Since(lastLog) >= 10*time.Second {
			logger.Info("Waiting for the extension CRDs", "groupVersion", gv, "missing", missing)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the extension CRDs: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// ensureNamespace creates the extension's namespace if it is missing, so that the heartbeat can renew its Lease
// when provider-local runs outside a ControllerInstallation.
func ensureNamespace(ctx context.Context, r client.Reader, c client.Client, name string) error {
	if name == "" {
		return nil
	}
	err := r.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	err = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want json or text", format)
}
