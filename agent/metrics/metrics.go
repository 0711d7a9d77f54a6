package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"
)

// Registry is the process's shared registry of the agent's metrics.
var Registry = prometheus.NewRegistry()

var (
	requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "Number of HTTP requests, partitioned by status code, method, and host.",
	}, []string{"code", "method", "host"})

	depth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "depth",
		Help: "Current depth of workqueue by workqueue and priority",
	}, []string{"name", "controller", "priority"})
	adds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: "adds_total",
		Help: "Total number of adds handled by workqueue",
	}, []string{"name", "controller"})
	latency      = queueHistogram("queue_duration_seconds", "How long in seconds an item stays in workqueue before being requested")
	workDuration = queueHistogram("work_duration_seconds", "How long in seconds processing an item from workqueue takes.")
	unfinished   = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "unfinished_work_seconds",
		Help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. " +
			"Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate " +
			"at which this increases.",
	}, []string{"name", "controller"})
	longestRunning = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "longest_running_processor_seconds",
		Help: "How many seconds has the longest running processor for workqueue been running.",
	}, []string{"name", "controller"})
	retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: "retries_total",
		Help: "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
	}, []string{"name", "controller"})
)

// queueHistogram is a work queue histogram of durations, with controller-runtime's buckets.
func queueHistogram(name, help string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue", Name: name, Help: help,
		Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12), NativeHistogramBucketFactor: 1.1,
		NativeHistogramMaxBucketNumber: 100, NativeHistogramMinResetDuration: time.Hour,
	}, []string{"name", "controller"})
}

// init connects client-go's request and work queue metrics to Registry. client-go takes the first registration of
// each and ignores later ones.
func init() {
	Registry.MustRegister(requests, depth, adds, latency, workDuration, unfinished, longestRunning, retries)
	clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: requestResult{}})
	workqueue.SetProvider(queueMetrics{})
}

// requestResult counts client-go's requests in rest_client_requests_total.
type requestResult struct{}

func (requestResult) Increment(_ context.Context, code, method, host string) {
	requests.WithLabelValues(code, method, host).Inc()
}

// queueMetrics gives every named work queue its series, labelled with its name as queue and as controller.
type queueMetrics struct{}

func (queueMetrics) NewDepthMetric(n string) workqueue.GaugeMetric {
	return depth.WithLabelValues(n, n, "")
}
func (queueMetrics) NewAddsMetric(n string) workqueue.CounterMetric {
	return adds.WithLabelValues(n, n)
}
func (queueMetrics) NewLatencyMetric(n string) workqueue.HistogramMetric {
	return latency.WithLabelValues(n, n)
}
func (queueMetrics) NewWorkDurationMetric(n string) workqueue.HistogramMetric {
	return workDuration.WithLabelValues(n, n)
}
func (queueMetrics) NewUnfinishedWorkSecondsMetric(n string) workqueue.SettableGaugeMetric {
	return unfinished.WithLabelValues(n, n)
}
func (queueMetrics) NewLongestRunningProcessorSecondsMetric(n string) workqueue.SettableGaugeMetric {
	return longestRunning.WithLabelValues(n, n)
}
func (queueMetrics) NewRetriesMetric(n string) workqueue.CounterMetric {
	return retries.WithLabelValues(n, n)
}
