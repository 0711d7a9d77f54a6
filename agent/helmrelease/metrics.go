package helmrelease

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trellis-dev/trellis/agent/metrics"
)

// The operations of operationDuration's operation label: the Helm action an Apply or Uninstall ran, or none when
// Apply found the release up to date (or failed before choosing one).
const (
	opInstall   = "install"
	opUpgrade   = "upgrade"
	opUninstall = "uninstall"
	opNone      = "none"
)

// operationDuration is the run time of each Apply and Uninstall (the wait for the release's lock included) by the
// Helm action it ran and its outcome ("success" or "error"); its _count is the number of operations. It is
// registered with the agent's shared registry (agent/metrics), which the agent's /metrics serves.
var operationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "trellis_agent_helm_operation_duration_seconds",
	Help:    "Run time of the agent's Helm release operations (ControllerInstallations) by operation (install, upgrade, uninstall, none) and outcome (success, error).",
	Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
}, []string{"operation", "outcome"})

func init() {
	metrics.Registry.MustRegister(operationDuration)
	// Every series exists from the start, so that rates and alerts see zeros rather than nothing.
	for _, op := range []string{opInstall, opUpgrade, opUninstall, opNone} {
		for _, outcome := range []string{"success", "error"} {
			operationDuration.WithLabelValues(op, outcome)
		}
	}
}

// observe records an operation that began at begin and ended with err.
func observe(operation string, begin time.Time, err error) {
	outcome := "success"
	if err != nil {
		outcome = "error"
	}
	operationDuration.WithLabelValues(operation, outcome).Observe(time.Since(begin).Seconds())
}
