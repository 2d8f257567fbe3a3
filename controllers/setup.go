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
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/version"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// Engine is the part of the Redis engine the controllers use; *broker.Broker
// implements it. Tests may wrap it to inject failures.
type Engine interface {
	EnsureQueue(ctx context.Context, q broker.QueueRef, cfg broker.QueueConfig) error
	Pause(ctx context.Context, q broker.QueueRef) error
	Resume(ctx context.Context, q broker.QueueRef) error
	Stats(ctx context.Context, q broker.QueueRef) (broker.QueueStats, error)
	Submit(ctx context.Context, q broker.QueueRef, req broker.SubmitRequest) (broker.SubmitResult, error)
	GetTask(ctx context.Context, q broker.QueueRef, id string) (broker.TaskInfo, error)
	Cancel(ctx context.Context, q broker.QueueRef, id string) (broker.State, error)
	ReadEventsMany(ctx context.Context, cursors []broker.EventsCursor, count int) []broker.EventsReply
	PromoteDueMany(ctx context.Context, qs []broker.QueueRef, limit int) []broker.Promotion
	Retry(ctx context.Context, q broker.QueueRef, id, token string) (broker.TaskInfo, error)
	TaskCRTasks(ctx context.Context, q broker.QueueRef) ([]string, error)
	DeleteQueue(ctx context.Context, q broker.QueueRef) (int, error)
	QueueMetrics(ctx context.Context, q broker.QueueRef) (broker.QueueMetrics, error)
	Workers(ctx context.Context, q broker.QueueRef) ([]broker.WorkerInfo, error)
	RecordHistory(ctx context.Context, q broker.QueueRef, keep int64, ttl time.Duration) error
	ReconcileFlowSlots(ctx context.Context, q broker.QueueRef) (int, error)
}

// DefaultWorkerImage is the worker image of the manager's own version
// (ghcr.io/dtq-dev/dtq-worker:v<version>), so the workers the manager starts
// match it.
var DefaultWorkerImage = version.Image("dtq-worker")

// Defaults of Options.
const (
	DefaultCoalesceWindow = 300 * time.Millisecond
	DefaultResyncPeriod   = 30 * time.Second
	// DefaultTaskConcurrency reconciles Tasks in parallel: a reconcile is
	// mostly waiting on Redis and the API server.
	DefaultTaskConcurrency = 16
	// DefaultQueueConcurrency reconciles Queues in parallel: with hundreds of
	// Queues polled every busyRequeue, one at a time falls behind
	// (docs/benchmarks.md, "Many Queues").
	DefaultQueueConcurrency = 4
	// busyRequeue is how often a Queue with backlog or workers is re-read for
	// autoscaling and status.
	busyRequeue = 2 * time.Second
)

// Options configures the controllers. Zero fields take the defaults.
type Options struct {
	// Clock is the time source of status timestamps, TTLs and autoscaling windows.
	Clock clock.Clock
	// Engine replaces the broker built on rdb (tests).
	Engine Engine
	// Workers configures the worker Deployments.
	Workers WorkerOptions
	// CoalesceWindow is how long a freshly submitted (or freshly started) task's
	// status write waits, so a fast task costs one write instead of one per transition.
	CoalesceWindow time.Duration
	// ResyncPeriod is how often every unfinished Task is re-read from Redis, to
	// cover events the syncer missed (stream trimmed, manager down).
	ResyncPeriod time.Duration
	// RoutineTaskEvents also emits the Normal Submitted and Succeeded Events of
	// every Task. Off by default: each Event is an API write, and at volume they
	// would double a task's writes; the status already shows both. Warnings and
	// the notable Normal Events (Duplicate, Cancelled) are always emitted.
	RoutineTaskEvents bool
	// TaskConcurrency is how many Tasks are reconciled at once.
	TaskConcurrency int
	// RedisUsers replaces the namespace users' manager built on rdb (tests);
	// used when Workers.Isolation is on.
	RedisUsers RedisUsers
	// RedisUserResync is how often each namespace's Redis user is checked.
	RedisUserResync time.Duration
	// QueueConcurrency is how many Queues are reconciled at once.
	QueueConcurrency int
	// History configures the sampling of the queues' history.
	History HistoryOptions
}

func (o Options) withDefaults(rdb redis.UniversalClient) Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Engine == nil {
		o.Engine = broker.New(rdb, broker.WithClock(o.Clock))
	}
	if o.Workers.Image == "" {
		o.Workers.Image = DefaultWorkerImage
	}
	if o.CoalesceWindow == 0 {
		o.CoalesceWindow = DefaultCoalesceWindow
	}
	if o.TaskConcurrency == 0 {
		o.TaskConcurrency = DefaultTaskConcurrency
	}
	if o.QueueConcurrency == 0 {
		o.QueueConcurrency = DefaultQueueConcurrency
	}
	if o.ResyncPeriod == 0 {
		o.ResyncPeriod = DefaultResyncPeriod
	}
	if o.RedisUsers == nil {
		o.RedisUsers = broker.NewACL(rdb)
	}
	if o.RedisUserResync == 0 {
		o.RedisUserResync = DefaultRedisUserResync
	}
	if o.History.Interval == 0 {
		o.History.Interval = DefaultHistoryInterval
	}
	if o.History.Samples <= 0 {
		o.History.Samples = DefaultHistorySamples
	}
	return o
}

// CacheOptions are the manager's cache settings the controllers are built
// for: Tasks without their payload (task_payload.go), only the Deployments
// carrying the Queue label and only the Secrets the operator manages, and no
// managedFields on any object. cmd/manager passes them to ctrl.NewManager.
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&dtqv1alpha1.Task{}:  {Transform: stripTask},
			&appsv1.Deployment{}: {Label: labels.NewSelector().Add(hasLabel(LabelQueue))},
			&corev1.Secret{}:     {Label: labels.SelectorFromSet(labels.Set{LabelRedisUser: "true"})},
		},
	}
}

func hasLabel(key string) labels.Requirement {
	r, err := labels.NewRequirement(key, selection.Exists, nil)
	if err != nil {
		panic(err) // key is a constant
	}
	return *r
}

// Setup registers the dtq controllers and runnables with mgr: the Queue,
// Task and TaskSchedule reconcilers, the namespaces' Redis users (with Workers.Isolation), the
// leader-elected per-queue loops (status syncer and delay/retry scheduler),
// the sampler of the queues' history, and the per-queue metrics on controller-runtime's registry (served on the
// manager's metrics endpoint). rdb is the queues' Redis. mgr's cache must use
// CacheOptions.
func Setup(mgr ctrl.Manager, rdb redis.UniversalClient, opts Options) error {
	opts = opts.withDefaults(rdb)
	if err := setupIndexes(context.Background(), mgr); err != nil {
		return err
	}
	recorder := mgr.GetEventRecorder("dtq-controller")
	taskEvents := make(chan event.TypedGenericEvent[*dtqv1alpha1.Task], 4096)
	queueEvents := make(chan event.TypedGenericEvent[*dtqv1alpha1.Queue], 256)

	tr := &TaskReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Engine: opts.Engine, Clock: opts.Clock, Recorder: recorder,
		CoalesceWindow: opts.CoalesceWindow, RoutineEvents: opts.RoutineTaskEvents, tombstones: newTombstones(),
	}
	if err := tr.SetupWithManager(mgr, opts.TaskConcurrency, taskEvents); err != nil {
		return fmt.Errorf("set up task controller: %w", err)
	}
	qr := &QueueReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Engine: opts.Engine, Clock: opts.Clock,
		Recorder: recorder, Workers: opts.Workers,
	}
	if err := qr.SetupWithManager(mgr, opts.QueueConcurrency, queueEvents); err != nil {
		return fmt.Errorf("set up queue controller: %w", err)
	}
	if opts.Workers.Isolation {
		ur := &RedisUserReconciler{
			Client: mgr.GetClient(), Users: opts.RedisUsers, Clock: opts.Clock, Recorder: recorder, Resync: opts.RedisUserResync,
		}
		if err := ur.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("set up redis user controller: %w", err)
		}
	}
	sr := &TaskScheduleReconciler{Client: mgr.GetClient(), Clock: opts.Clock, Recorder: recorder}
	if err := sr.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up taskschedule controller: %w", err)
	}
	loops := &queueLoops{
		client: mgr.GetClient(), engine: opts.Engine, clock: opts.Clock,
		taskEvents: taskEvents, queueEvents: queueEvents, resyncPeriod: opts.ResyncPeriod,
	}
	if err := mgr.Add(loops); err != nil {
		return fmt.Errorf("add queue loops: %w", err)
	}
	if opts.History.Interval > 0 {
		history := &queueHistory{reader: mgr.GetClient(), engine: opts.Engine, clock: opts.Clock,
			interval: opts.History.Interval, samples: opts.History.Samples}
		if err := mgr.Add(history); err != nil {
			return fmt.Errorf("add queue history: %w", err)
		}
	}
	qc := newQueueCollector(mgr.GetClient(), opts.Engine, opts.Clock, mgr.Elected())
	// The last manager set up in a process exports (tests set up several).
	ctrlmetrics.Registry.Unregister(qc)
	if err := ctrlmetrics.Registry.Register(qc); err != nil {
		return fmt.Errorf("register queue metrics: %w", err)
	}
	sc := newScheduleCollector(mgr.GetClient(), mgr.Elected())
	ctrlmetrics.Registry.Unregister(sc)
	if err := ctrlmetrics.Registry.Register(sc); err != nil {
		return fmt.Errorf("register schedule metrics: %w", err)
	}
	return nil
}
