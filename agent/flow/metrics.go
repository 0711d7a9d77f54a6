package flow

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"

	"github.com/trellis-dev/trellis/agent/metrics"
)

// taskDuration is each task's run time, retries included, by flow, task and outcome ("success" or "error"). It is
// registered with the agent's shared registry (agent/metrics), which the agent's /metrics serves.
var taskDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "trellis_agent_flow_task_duration_seconds",
	Help:    "Run time of flow tasks (retries included) by flow, task and outcome.",
	Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
}, []string{"flow", "task", "outcome"})

func init() { metrics.Registry.MustRegister(taskDuration) }

// tracer makes a span per task, a child of the span in the flow's context (the global TracerProvider: a no-op until
// the program installs one).
var tracer = otel.Tracer("github.com/trellis-dev/trellis/agent/flow")
