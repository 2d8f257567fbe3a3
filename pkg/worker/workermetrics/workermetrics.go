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

// Package workermetrics is worker.Metrics on Prometheus: the dtq_worker_*
// series of docs/metrics.md, plus the Go runtime's and the process's, which
// the reference worker (cmd/worker) and the HTTP delivery sidecar serve on
// /metrics:
//
//	cfg.Metrics = workermetrics.New()
//
// Each Metrics has a private registry, so several servers can run in one
// process (tests). Labels are namespace, queue (the Queue's namespace and
// name, as on the manager's dtq_queue_ series) and task_type: never task IDs
// or payloads.
package workermetrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dtq-dev/dtq/pkg/worker"
)

// Metrics is a worker.Metrics on its own Prometheus registry.
type Metrics struct {
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

// New returns Metrics with the dtq_worker_* series and the Go and process
// collectors registered on a fresh registry.
func New() *Metrics {
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
	m := &Metrics{
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

// Registry returns the private registry, for a program that adds its own
// collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Queue sets the queue's dtq_worker_slots and returns its measurements.
func (m *Metrics) Queue(namespace, queue string, concurrency int) worker.QueueMetrics {
	m.slots.WithLabelValues(namespace, queue).Set(float64(concurrency))
	return &queueMetrics{m: m, namespace: namespace, queue: queue, inFlight: m.inFlight.WithLabelValues(namespace, queue)}
}

type queueMetrics struct {
	m                *Metrics
	namespace, queue string
	inFlight         prometheus.Gauge
}

func (q *queueMetrics) InFlight(delta int) { q.inFlight.Add(float64(delta)) }

// TaskType returns the handles of one task_type value. Each is looked up on
// its first use, so a series appears only once something happened to it (no
// zero-valued series of outcomes a task type never had), and only once
// (WithLabelValues hashes and validates its values on each call).
func (q *queueMetrics) TaskType(taskType string) worker.TaskMetrics {
	lbl := []string{q.namespace, q.queue, taskType}
	tm := &taskMetrics{}
	tm.started.make = bind(q.m.started.WithLabelValues, lbl)
	tm.succeeded.make = bind(q.m.succeeded.WithLabelValues, lbl)
	tm.failed.make = bind(q.m.failed.WithLabelValues, lbl)
	tm.retried.make = bind(q.m.retried.WithLabelValues, lbl)
	tm.deadLettered.make = bind(q.m.deadLettered.WithLabelValues, lbl)
	tm.cancelled.make = bind(q.m.cancelled.WithLabelValues, lbl)
	tm.execution.make = bind(q.m.execution.WithLabelValues, lbl)
	tm.wait.make = bind(q.m.wait.WithLabelValues, lbl)
	tm.latency.make = bind(q.m.latency.WithLabelValues, lbl)
	return tm
}

type taskMetrics struct {
	started, succeeded, failed, retried, deadLettered, cancelled lazy[prometheus.Counter]
	execution, wait, latency                                     lazy[prometheus.Observer]
}

func (t *taskMetrics) Started()                  { t.started.get().Inc() }
func (t *taskMetrics) Succeeded()                { t.succeeded.get().Inc() }
func (t *taskMetrics) Failed()                   { t.failed.get().Inc() }
func (t *taskMetrics) Retried()                  { t.retried.get().Inc() }
func (t *taskMetrics) DeadLettered()             { t.deadLettered.get().Inc() }
func (t *taskMetrics) Cancelled()                { t.cancelled.get().Inc() }
func (t *taskMetrics) Wait(d time.Duration)      { t.wait.get().Observe(d.Seconds()) }
func (t *taskMetrics) Execution(d time.Duration) { t.execution.get().Observe(d.Seconds()) }
func (t *taskMetrics) Latency(d time.Duration)   { t.latency.get().Observe(d.Seconds()) }

// lazy is a metric handle made on first use.
type lazy[T any] struct {
	once sync.Once
	make func() T
	v    T
}

func (l *lazy[T]) get() T {
	l.once.Do(func() { l.v = l.make() })
	return l.v
}

// bind is withLabelValues of lbl, called later.
func bind[T any](withLabelValues func(...string) T, lbl []string) func() T {
	return func() T { return withLabelValues(lbl...) }
}
