package audit

import (
	"errors"
	"flag"
	"log/slog"
	"time"
)

// Config configures the audit log, with kube-apiserver's flags (AddFlags). Neither a log path nor a webhook: no
// audit log.
type Config struct {
	// PolicyFile is an audit.k8s.io/v1 Policy (--audit-policy-file). Required when a backend is configured.
	PolicyFile string
	// LogPath is the file events are appended to, one JSON Event per line; "-" is standard output (--audit-log-path).
	LogPath string
	// LogMaxAge is the number of days rotated files are kept (0: no limit; --audit-log-maxage).
	LogMaxAge int
	// LogMaxBackups is the number of rotated files kept (0: no limit; --audit-log-maxbackup).
	LogMaxBackups int
	// LogMaxSize is the size in megabytes at which the file is rotated (0: lumberjack's default of 100 MB;
	// --audit-log-maxsize).
	LogMaxSize int
	// LogCompress gzips rotated files (--audit-log-compress).
	LogCompress bool
	// WebhookConfigFile is a kubeconfig naming the webhook's server and credentials (--audit-webhook-config-file).
	WebhookConfigFile string
	// WebhookInitialBackoff is the wait before retrying a failed webhook request (--audit-webhook-initial-backoff;
	// default 10 s).
	WebhookInitialBackoff time.Duration
	// WebhookBatchMaxWait is the longest an event waits in the webhook's batch (--audit-webhook-batch-max-wait;
	// default 30 s).
	WebhookBatchMaxWait time.Duration
	// Logger receives the backends' failures.
	Logger *slog.Logger
}

// Enabled reports whether a backend is configured.
func (c Config) Enabled() bool { return c.LogPath != "" || c.WebhookConfigFile != "" }

// Validate reports configuration errors, naming the flag.
func (c Config) Validate() error {
	var errs []error
	if c.Enabled() && c.PolicyFile == "" {
		errs = append(errs, errors.New("audit-policy-file: required with --audit-log-path or --audit-webhook-config-file"))
	}
	if c.LogMaxAge < 0 {
		errs = append(errs, errors.New("audit-log-maxage: must not be negative"))
	}
	if c.LogMaxBackups < 0 {
		errs = append(errs, errors.New("audit-log-maxbackup: must not be negative"))
	}
	if c.LogMaxSize < 0 {
		errs = append(errs, errors.New("audit-log-maxsize: must not be negative"))
	}
	if c.WebhookInitialBackoff < 0 {
		errs = append(errs, errors.New("audit-webhook-initial-backoff: must not be negative"))
	}
	if c.WebhookBatchMaxWait < 0 {
		errs = append(errs, errors.New("audit-webhook-batch-max-wait: must not be negative"))
	}
	return errors.Join(errs...)
}

// AddFlags binds the configuration to kube-apiserver's audit flags.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.PolicyFile, "audit-policy-file", "", "audit.k8s.io/v1 Policy choosing each request's audit level and omitted stages")
	fs.StringVar(&c.LogPath, "audit-log-path", "", "file the audit events are appended to, one JSON Event per line ('-': standard output; empty: no audit log file)")
	fs.IntVar(&c.LogMaxAge, "audit-log-maxage", 0, "days to keep rotated audit log files (0: no limit)")
	fs.IntVar(&c.LogMaxBackups, "audit-log-maxbackup", 0, "rotated audit log files to keep (0: no limit)")
	fs.IntVar(&c.LogMaxSize, "audit-log-maxsize", 0, "megabytes at which the audit log file is rotated (0: 100)")
	fs.BoolVar(&c.LogCompress, "audit-log-compress", false, "gzip rotated audit log files")
	fs.StringVar(&c.WebhookConfigFile, "audit-webhook-config-file", "", "kubeconfig of the audit webhook the events are sent to (empty: none)")
	fs.DurationVar(&c.WebhookInitialBackoff, "audit-webhook-initial-backoff", 10*time.Second, "wait before retrying a failed audit webhook request")
	fs.DurationVar(&c.WebhookBatchMaxWait, "audit-webhook-batch-max-wait", 30*time.Second, "longest an audit event waits in the webhook's batch")
}
