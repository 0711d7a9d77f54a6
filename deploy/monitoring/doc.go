// Package monitoring holds Trellis's Grafana dashboards (dashboards/*.json) and Prometheus alert rules
// (alerts/*.yaml) as files for operators to load; its test checks them against the metrics the hub and the agent
// export.
package monitoring
