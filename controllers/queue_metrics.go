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

package controllers

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
)

const (
	metricsReadTimeout     = 5 * time.Second // a scrape's Redis reads (Prometheus' default scrape timeout is 10s)
	metricsReadConcurrency = 32              // queues read at once; their script calls share pipelined round trips
)

// The per-queue series (docs/metrics.md). Every one has the labels namespace
// and queue (the Queue's namespace and name).
var (
	queueLabels = []string{"namespace", "queue"}

	queuedTasksDesc = prometheus.NewDesc("dtq_queue_queued_tasks",
		"Tasks waiting in the queue's streams, not yet delivered to a worker, by priority (0..9).",
		append(queueLabels, "priority"), nil)
	inFlightTasksDesc = prometheus.NewDesc("dtq_queue_in_flight_tasks",
		"Tasks delivered to a worker and not yet acknowledged.", queueLabels, nil)
	scheduledTasksDesc = prometheus.NewDesc("dtq_queue_scheduled_tasks",
		"Delayed tasks and retries waiting for their due time.", queueLabels, nil)
	deadLetteredTasksDesc = prometheus.NewDesc("dtq_queue_dead_lettered_tasks",
		"Entries in the queue's dead-letter stream.", queueLabels, nil)
	oldestQueuedAgeDesc = prometheus.NewDesc("dtq_queue_oldest_queued_task_age_seconds",
		"Time since the oldest task not yet delivered was queued (submitted, or due); 0 when none waits.", queueLabels, nil)
	pausedDesc = prometheus.NewDesc("dtq_queue_paused",
		"1 when the queue is paused, else 0.", queueLabels, nil)
	workersDesiredDesc = prometheus.NewDesc("dtq_queue_workers_desired",
		"Worker replicas the autoscaler asks for (the Queue's status.desiredWorkers).", queueLabels, nil)
	workersReadyDesc = prometheus.NewDesc("dtq_queue_workers_ready",
		"Ready worker replicas (the Queue's status.readyWorkers).", queueLabels, nil)
	submissionsDesc = prometheus.NewDesc("dtq_queue_submissions_total",
		"Submissions the queue accepted: result=accepted (a new task) or duplicate (a replay of a finished idempotency record).",
		append(queueLabels, "result"), nil)
	refusedDesc = prometheus.NewDesc("dtq_queue_submissions_refused_total",
		"Submissions the queue refused, by error code.", append(queueLabels, "code"), nil)
	finishedDesc = prometheus.NewDesc("dtq_queue_tasks_finished_total",
		"Tasks that reached a terminal state, by state.", append(queueLabels, "state"), nil)
	retriesDesc = prometheus.NewDesc("dtq_queue_retries_total",
		"Failed attempts scheduled for a retry.", queueLabels, nil)
	redeliveriesDesc = prometheus.NewDesc("dtq_queue_redeliveries_total",
		"Entries reclaimed from a worker that stopped heartbeating and delivered again.", queueLabels, nil)

	// The flow control series, exported for queues with flow control only,
	// with no per-key label (a key is a tenant: unbounded cardinality).
	flowAdmissibleDesc = prometheus.NewDesc("dtq_queue_flow_admissible_tasks",
		"Waiting tasks of a flow-controlled queue that the per-key limits let start now (the Queue's status.flow.admissible).", queueLabels, nil)
	flowThrottledDesc = prometheus.NewDesc("dtq_queue_flow_throttled_tasks",
		"Waiting tasks of a flow-controlled queue held back by a per-key limit.", queueLabels, nil)
	flowHeldSlotsDesc = prometheus.NewDesc("dtq_queue_flow_held_slots",
		"Concurrency slots held: tasks of a flow-controlled queue Running.", queueLabels, nil)
	flowActiveKeysDesc = prometheus.NewDesc("dtq_queue_flow_active_keys",
		"Flow keys with waiting tasks.", queueLabels, nil)
	flowParkedKeysDesc = prometheus.NewDesc("dtq_queue_flow_parked_keys",
		"Flow keys at their concurrency cap or over their rate.", queueLabels, nil)
	flowLimitedDesc = prometheus.NewDesc("dtq_queue_flow_limited",
		"1 while the limit holds tasks back (the Queue's FlowLimited condition), else 0: "+
			"limit=RateLimit, MaxConcurrency, KeyConcurrency or KeyRateLimit.", append(queueLabels, "limit"), nil)

	queueDescs = []*prometheus.Desc{queuedTasksDesc, inFlightTasksDesc, scheduledTasksDesc, deadLetteredTasksDesc,
		oldestQueuedAgeDesc, pausedDesc, workersDesiredDesc, workersReadyDesc, submissionsDesc, refusedDesc,
		finishedDesc, retriesDesc, redeliveriesDesc,
		flowAdmissibleDesc, flowThrottledDesc, flowHeldSlotsDesc, flowActiveKeysDesc, flowParkedKeysDesc, flowLimitedDesc}

	// Label values exported even at zero, so that rate() and alerts see a
	// series from the queue's first scrape on.
	refusedCodes = []broker.Code{broker.CodeIdempotencyInProgress, broker.CodeIdempotencyKeyMismatch, broker.CodeQueueFull,
		broker.CodePayloadTooLarge}
	finishedStates = []broker.State{broker.StateSucceeded, broker.StateFailed, broker.StateDeadLettered,
		broker.StateCancelled, broker.StateExpired}
	flowLimits = []broker.FlowLimit{broker.LimitRate, broker.LimitMaxConcurrency, broker.LimitKeyConcurrency, broker.LimitKeyRate}
)

// electedCollector is a Prometheus collector of the series descs that only
// the elected manager exports: a standby one exports none, so a series is
// not doubled by every manager replica. On each scrape it runs collect with
// a context bounded by metricsReadTimeout.
type electedCollector struct {
	descs   []*prometheus.Desc
	elected <-chan struct{}
	collect func(ctx context.Context, ch chan<- prometheus.Metric)
}

func (c *electedCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *electedCollector) Collect(ch chan<- prometheus.Metric) {
	select {
	case <-c.elected:
	default:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), metricsReadTimeout)
	defer cancel()
	c.collect(ctx, ch)
}

// queueCollector collects the per-queue series: on each scrape, in the
// elected leader, it lists the Queues from the cache, reads each one's
// backlog and counters from Redis (Engine.QueueMetrics,
// metricsReadConcurrency at a time) and its workers from its status. The
// counters live in Redis, so they are the queue's totals whichever API
// replica, manager or worker did the work.
type queueCollector struct {
	reader client.Reader
	engine Engine
	clock  clock.PassiveClock
}

// newQueueCollector is the manager's collector of per-queue series.
func newQueueCollector(reader client.Reader, engine Engine, clk clock.PassiveClock, elected <-chan struct{}) prometheus.Collector {
	c := &queueCollector{reader: reader, engine: engine, clock: clk}
	return &electedCollector{descs: queueDescs, elected: elected, collect: c.collect}
}

func (c *queueCollector) collect(ctx context.Context, ch chan<- prometheus.Metric) {
	var queues dtqv1alpha1.QueueList
	if err := c.reader.List(ctx, &queues); err != nil {
		ch <- prometheus.NewInvalidMetric(workersReadyDesc, err)
		return
	}
	ms := make([]broker.QueueMetrics, len(queues.Items))
	errs := make([]error, len(queues.Items))
	sem := make(chan struct{}, metricsReadConcurrency)
	var wg sync.WaitGroup
	for i := range queues.Items {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ms[i], errs[i] = c.engine.QueueMetrics(ctx, queueRefOf(&queues.Items[i]))
		})
	}
	wg.Wait()
	now := c.clock.Now()
	for i := range queues.Items {
		q := &queues.Items[i]
		lv := []string{q.Namespace, q.Name}
		emit(ch, workersDesiredDesc, prometheus.GaugeValue, float64(q.Status.DesiredWorkers), lv)
		emit(ch, workersReadyDesc, prometheus.GaugeValue, float64(q.Status.ReadyWorkers), lv)
		if errs[i] != nil {
			// Counted in dtq_redis_command_errors_total; the queue's Redis
			// series are missing from this scrape.
			ctrl.Log.WithName("queue-metrics").Error(errs[i], "Read queue metrics", "namespace", q.Namespace, "queue", q.Name)
			continue
		}
		emitQueue(ch, ms[i], now, lv)
	}
}

// emitQueue sends the series read from Redis for one queue (labels lv).
func emitQueue(ch chan<- prometheus.Metric, m broker.QueueMetrics, now time.Time, lv []string) {
	for band, n := range m.Queued {
		emit(ch, queuedTasksDesc, prometheus.GaugeValue, float64(n), lv, strconv.Itoa(band))
	}
	emit(ch, inFlightTasksDesc, prometheus.GaugeValue, float64(m.InFlight), lv)
	emit(ch, scheduledTasksDesc, prometheus.GaugeValue, float64(m.Scheduled), lv)
	emit(ch, deadLetteredTasksDesc, prometheus.GaugeValue, float64(m.DeadLettered), lv)
	age := 0.0
	if !m.OldestQueued.IsZero() {
		age = max(0, now.Sub(m.OldestQueued).Seconds()) // stream IDs are Redis' clock
	}
	emit(ch, oldestQueuedAgeDesc, prometheus.GaugeValue, age, lv)
	paused := 0.0
	if m.Paused {
		paused = 1
	}
	emit(ch, pausedDesc, prometheus.GaugeValue, paused, lv)
	c := m.Counters
	emit(ch, submissionsDesc, prometheus.CounterValue, float64(c.Accepted), lv, "accepted")
	emit(ch, submissionsDesc, prometheus.CounterValue, float64(c.Duplicates), lv, "duplicate")
	for _, code := range refusedCodes {
		emit(ch, refusedDesc, prometheus.CounterValue, float64(c.Refused[code]), lv, string(code))
	}
	for _, st := range finishedStates {
		emit(ch, finishedDesc, prometheus.CounterValue, float64(c.Finished[st]), lv, string(st))
	}
	emit(ch, retriesDesc, prometheus.CounterValue, float64(c.Retries), lv)
	emit(ch, redeliveriesDesc, prometheus.CounterValue, float64(c.Redeliveries), lv)
	if m.Flow.Enabled {
		emitFlow(ch, m.Flow, lv)
	}
}

// emitFlow sends a flow-controlled queue's flow series (labels lv).
func emitFlow(ch chan<- prometheus.Metric, f broker.FlowMetrics, lv []string) {
	emit(ch, flowAdmissibleDesc, prometheus.GaugeValue, float64(f.Admissible), lv)
	emit(ch, flowThrottledDesc, prometheus.GaugeValue, float64(f.Throttled), lv)
	emit(ch, flowHeldSlotsDesc, prometheus.GaugeValue, float64(f.Held), lv)
	emit(ch, flowActiveKeysDesc, prometheus.GaugeValue, float64(f.ActiveKeys), lv)
	emit(ch, flowParkedKeysDesc, prometheus.GaugeValue, float64(f.ParkedKeys), lv)
	for _, l := range flowLimits {
		v := 0.0
		if slices.Contains(f.LimitedBy, l) {
			v = 1
		}
		emit(ch, flowLimitedDesc, prometheus.GaugeValue, v, lv, string(l))
	}
}

func emit(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, lv []string, extra ...string) {
	ch <- prometheus.MustNewConstMetric(d, t, v, append(lv[:len(lv):len(lv)], extra...)...)
}
