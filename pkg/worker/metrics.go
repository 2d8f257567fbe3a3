/*
Copyright 2026 The dtq Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package worker

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are per Server, on a private registry, so several servers can run in
// one process (tests). Labels are namespace, queue (the Queue's namespace and
// name, as on the manager's dtq_queue_ series) and task_type: never task ids
// or payloads. The series are listed in docs/metrics.md.
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
	latency      *prometheus.HistogramVec
	inFlight     *prometheus.GaugeVec
	slots        *prometheus.GaugeVec
}

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	labels := []string{"namespace", "queue", "task_type"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "dtq", Subsystem: "worker", Name: name, Help: help}, labels)
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "dtq", Subsystem: "worker", Name: name, Help: help,
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, labels) // 1ms .. 4.4min
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "dtq", Subsystem: "worker", Name: name, Help: help},
			[]string{"namespace", "queue"})
	}
	m := &metrics{
		reg:          reg,
		started:      counter("tasks_started_total", "Handler executions started."),
		succeeded:    counter("tasks_succeeded_total", "Executions that ended the task Succeeded."),
		failed:       counter("tasks_failed_total", "Executions that returned an error (whatever followed: retry, dead letter or Failed)."),
		retried:      counter("tasks_retried_total", "Failed executions scheduled for a retry."),
		deadLettered: counter("tasks_dead_lettered_total", "Tasks this worker moved to DeadLettered (exhausted, permanent error, or crash loop on delivery)."),
		cancelled:    counter("tasks_cancelled_total", "Running tasks stopped by a cancel request."),
		execution:    histogram("task_execution_seconds", "Handler execution time."),
		wait:         histogram("task_wait_seconds", "Time from a task becoming runnable (submitted, or due when delayed or retrying) to its handler starting."),
		latency: histogram("task_latency_seconds",
			"Time from a task becoming runnable to the outcome of its execution being recorded: wait, execution and the completion write."),
		inFlight: gauge("tasks_in_flight", "Handlers running now."),
		slots:    gauge("slots", "Execution slots (the worker's concurrency)."),
	}
	reg.MustRegister(m.started, m.succeeded, m.failed, m.retried, m.deadLettered, m.cancelled, m.execution, m.wait,
		m.latency, m.inFlight, m.slots, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
