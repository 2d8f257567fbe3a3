package worker

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are per Server, on a private registry, so several servers can run in
// one process (tests). Labels are queue and task_type only: never task ids or
// payloads.
type metrics struct {
	reg          *prometheus.Registry
	started      *prometheus.CounterVec
	succeeded    *prometheus.CounterVec
	failed       *prometheus.CounterVec
	retried      *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	cancelled    *prometheus.CounterVec
	execution    *prometheus.HistogramVec
	wait         *prometheus.HistogramVec
	inflight     *prometheus.GaugeVec
}

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	var cl prometheus.Labels // the pod label identifies the worker
	labels := []string{"queue", "task_type"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "dtq", Subsystem: "worker", Name: name, Help: help, ConstLabels: cl}, labels)
	}
	m := &metrics{
		reg:          reg,
		started:      counter("tasks_started_total", "Handler executions started."),
		succeeded:    counter("tasks_succeeded_total", "Executions that ended the task Succeeded."),
		failed:       counter("tasks_failed_total", "Executions that returned an error (whatever followed: retry, dead letter or Failed)."),
		retried:      counter("tasks_retried_total", "Failed executions scheduled for a retry."),
		deadLettered: counter("tasks_dead_lettered_total", "Tasks this worker moved to DeadLettered (exhausted, permanent error, or crash loop on delivery)."),
		cancelled:    counter("tasks_cancelled_total", "Running tasks stopped by a cancel request."),
		execution: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "dtq", Subsystem: "worker", Name: "task_execution_seconds",
			Help: "Handler execution time.", ConstLabels: cl, Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, labels),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "dtq", Subsystem: "worker", Name: "task_wait_seconds",
			Help: "Time from a task becoming runnable to its handler starting.", ConstLabels: cl, Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, labels),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "dtq", Subsystem: "worker", Name: "inflight",
			Help: "Handlers running now.", ConstLabels: cl}, []string{"queue"}),
	}
	reg.MustRegister(m.started, m.succeeded, m.failed, m.retried, m.deadLettered, m.cancelled, m.execution, m.wait, m.inflight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
