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
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/wait"
)

// Worker statuses written to the heartbeat record.
const (
	StatusStarting = "starting"
	StatusReady    = "ready"
	StatusBusy     = "busy"
	StatusDraining = "draining"
	StatusStopped  = "stopped"
)

const (
	readBlock      = time.Second            // longest blocking read; bounds how long a stop waits for the reader
	cancelPoll     = 250 * time.Millisecond // cancel-request polling period
	holdPoll       = 100 * time.Millisecond // Config.Hold polling period
	promoteLimit   = 100                    // schedule members promoted per call
	maxPromoteWait = time.Second            // longest scheduler sleep
	opTimeout      = 10 * time.Second       // per engine call
)

// Server runs handlers for one queue. Create it with NewServer and call Run once.
type Server struct {
	cfg     Config
	h       Handler
	rdb     redis.UniversalClient
	ownsRDB bool
	b       *broker.Broker // reads, heartbeats, housekeeping
	q       broker.QueueRef
	qname   string // q.String(), the handlers' Task.Queue
	log     *slog.Logger
	metrics Metrics      // Config.Metrics, or noMetrics
	qm      QueueMetrics // metrics' of q
	types   *typeLabels  // task_type label values
	byType  sync.Map     // task_type label value -> TaskMetrics (metricsOf)

	sem chan struct{} // execution slots; a slot is held from read to completion

	mu        sync.Mutex
	inflight  map[string]*execution // by stream message ID
	status    string
	hostname  string
	startedAt time.Time

	wg             sync.WaitGroup  // executions
	execs          chan *execution // hands an execution to an idle executor (see dispatchExec)
	executorsStop  chan struct{}   // closed when Run has no more executions: idle executors exit
	defaultTimeout time.Duration
	promoteNow     chan struct{}
	ran            atomic.Bool
	runCtx         context.Context // Run's: it ends when the drain begins
	stopRun        context.CancelCauseFunc
	// failed is set (fail) when the queue's Redis layout turns out to be one
	// this build cannot read: from then on the server writes nothing.
	failed atomic.Pointer[error]
	// reclaimAt is when readLoop next reclaims (unix ns). Executors read
	// their next entries with their completions (CompleteNext) only before
	// it, so a reclaim gets slots, and never while draining.
	reclaimAt atomic.Int64
}

type execution struct {
	d       broker.Delivery
	started *broker.StartResult // set when the read already started it (ReadStart)
	// attempt is the attempt this execution runs once started (0 before):
	// with d and the worker ID, the fencing token of Complete and Touch.
	attempt int
	// fresh is when the entry's idle time was last known reset (just before
	// the read or reclaim that delivered it, or a touch that kept it): past
	// fresh + visibility timeout a peer may have reclaimed it.
	fresh       time.Time
	cancel      context.CancelCauseFunc // set once the handler is about to run
	cancelReq   bool
	interrupted bool
	leaseLost   bool
	returned    bool // the handler returned: its outcome is being recorded (and fenced by the engine)
	progress    progress
}

// execution returns e's fencing token; call with s.mu held or before dispatch.
func (s *Server) execution(e *execution) broker.Execution {
	return broker.Execution{Delivery: e.d, WorkerID: s.cfg.WorkerID, Attempt: e.attempt}
}

// NewServer validates cfg and returns a Server that dispatches to h (usually a
// *Mux). It does not connect to Redis yet.
func NewServer(cfg Config, h Handler) (*Server, error) {
	if h == nil {
		return nil, errors.New("worker: nil handler")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	q := broker.QueueRef{Namespace: cfg.Namespace, Name: cfg.Queue}
	s := &Server{
		cfg:           cfg,
		h:             h,
		rdb:           cfg.Redis,
		q:             q,
		qname:         q.String(),
		log:           cfg.Logger.With("worker_id", cfg.WorkerID, "namespace", q.Namespace, "queue", q.Name),
		types:         newTypeLabels(h),
		sem:           make(chan struct{}, cfg.Concurrency),
		inflight:      map[string]*execution{},
		execs:         make(chan *execution),
		executorsStop: make(chan struct{}),
		status:        StatusStarting,
		promoteNow:    make(chan struct{}, 1),
	}
	s.metrics = cfg.Metrics
	if s.metrics == nil {
		s.metrics = noMetrics{}
	}
	s.qm = s.metrics.Queue(q.Namespace, q.Name, cfg.Concurrency)
	if s.rdb == nil {
		// One blocking read, Start (reclaims)+Complete per slot, heartbeat, reclaim, scheduler, cancel poll.
		conn := cfg.RedisConn
		conn.PoolSize = max(conn.PoolSize, cfg.Concurrency+8)
		rdb, err := conn.Client()
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		s.rdb = rdb
		s.ownsRDB = true
	}
	s.b = broker.New(s.rdb, broker.WithTracerProvider(s.cfg.TracerProvider))
	s.hostname, _ = os.Hostname()
	return s, nil
}

// Redis returns the server's Redis client, for handlers that keep their own
// state there (IdempotentOperation). Closed when Run returns if the server
// created it from RedisConn.
func (s *Server) Redis() redis.UniversalClient { return s.rdb }

// WorkerID returns the consumer name.
func (s *Server) WorkerID() string { return s.cfg.WorkerID }

// Status returns the current status (starting, ready, busy, draining, stopped).
func (s *Server) Status() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

func (s *Server) statusLocked() string {
	if s.status == StatusReady && s.cfg.Hold != nil {
		if h := s.cfg.Hold(); h != "" {
			return h
		}
	}
	if s.status == StatusReady && len(s.inflight) > 0 {
		return StatusBusy
	}
	return s.status
}

func (s *Server) setStatus(st string) {
	s.mu.Lock()
	s.status = st
	s.mu.Unlock()
}

// Run serves the queue until ctx ends, then drains: it stops reading, waits up
// to the drain timeout for in-flight handlers, cancels the rest and hands
// their tasks back to the queue at once (Release: never acknowledged as done,
// read by any worker without waiting for the visibility timeout), removes its
// consumer when it holds no pending entries and returns nil. It returns an error only when it cannot start (the metrics
// address is taken, or it is called twice). While the queue does not exist yet
// (the controller has not created it) Run waits for it.
//
// When the queue's Redis layout record (docs/upgrade.md) names a layout this
// build cannot read, at start or at any heartbeat, Run returns a
// *broker.LayoutError at once: before it has written anything when found at
// start; when found later it cancels its handlers and writes nothing more
// (no completion, hand-back, heartbeat or consumer removal; a client Run
// created is closed at once), leaving its tasks to newer workers after the
// visibility timeout.
func (s *Server) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return errors.New("worker: Server.Run called twice")
	}
	s.startedAt = time.Now()
	ctx, s.stopRun = context.WithCancelCause(ctx)
	defer s.stopRun(nil)
	s.runCtx = ctx
	if s.ownsRDB {
		defer s.rdb.Close()
	}
	stopMetrics, err := s.serveMetrics()
	if err != nil {
		return err
	}
	defer stopMetrics()

	// Background loops that live until the very end (they keep in-flight
	// entries fresh while draining).
	bgCtx, bgCancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	goLoop := func(wg *sync.WaitGroup, f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	goLoop(&bg, func() { s.heartbeatLoop(bgCtx) })
	goLoop(&bg, func() { s.cancelLoop(bgCtx) })

	if err := s.waitQueue(ctx); err != nil {
		s.fail(err)
	}
	if ctx.Err() != nil {
		bgCancel()
		bg.Wait()
		if err := s.failure(); err != nil {
			return err
		}
		s.finalHeartbeat()
		return nil
	}
	s.setStatus(StatusReady)
	s.log.Info("Worker ready", "concurrency", s.cfg.Concurrency, "visibility_timeout", s.cfg.VisibilityTimeout.String(),
		"heartbeat_interval", s.cfg.HeartbeatInterval.String(), "drain_timeout", s.cfg.DrainTimeout.String(), "types", typesOf(s.h))
	s.heartbeat(bgCtx)

	// Loops that stop at the start of the drain.
	stop := make(chan struct{})
	var fg sync.WaitGroup
	goLoop(&fg, func() { s.readLoop(stop) })
	goLoop(&fg, func() { s.schedulerLoop(stop) })

	<-ctx.Done()
	s.setStatus(StatusDraining)
	s.log.Info("Draining", "in_flight", s.inflightCount(), "budget", s.cfg.DrainTimeout.String())
	s.heartbeat(bgCtx)
	close(stop)
	fg.Wait() // deliveries already read are dispatched and count as in flight

	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	if s.failure() != nil {
		s.interruptAll()
	}
	timer := time.NewTimer(s.cfg.DrainTimeout)
	select {
	case <-done:
		timer.Stop()
	case <-timer.C:
		n := s.interruptAll()
		s.log.Warn("Drain budget exhausted; cancelled handlers' tasks are handed back for redelivery", "interrupted", n)
		<-done
	}
	close(s.executorsStop)
	bgCancel()
	bg.Wait()
	if err := s.failure(); err != nil {
		return err
	}

	rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := s.b.RemoveConsumer(rctx, s.q, s.cfg.WorkerID); err != nil {
		if errors.Is(err, broker.ErrConsumerBusy) {
			s.log.Info("Consumer kept: it holds pending entries that peers will reclaim")
		} else {
			s.log.Warn("Remove consumer", "error", err)
		}
	}
	s.finalHeartbeat()
	s.log.Info("Worker stopped")
	return nil
}

func (s *Server) finalHeartbeat() {
	s.setStatus(StatusStopped)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	s.heartbeat(ctx)
}

func typesOf(h Handler) []string {
	if m, ok := h.(*Mux); ok {
		return m.Types()
	}
	return nil
}

// waitQueue reads the queue config and checks its layout record, retrying
// while the queue does not exist or Redis is unreachable. It returns nil once
// the queue exists in a layout this build reads, a *broker.LayoutError when
// it is in another, and ctx's error when ctx ended first.
func (s *Server) waitQueue(ctx context.Context) error {
	bo := newBackoff()
	for {
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		qc, err := s.b.QueueConfig(cctx, s.q)
		if err == nil {
			err = s.b.CheckQueueLayout(cctx, s.q)
		}
		cancel()
		if err == nil {
			s.defaultTimeout = qc.DefaultTimeout
			if s.defaultTimeout <= 0 {
				s.defaultTimeout = broker.DefaultQueueConfig().DefaultTimeout
			}
			return nil
		}
		if errors.Is(err, broker.ErrLayoutUnknown) {
			return err
		}
		if errors.Is(err, broker.ErrQueueNotFound) {
			s.log.Info("Waiting for the queue to be created")
		} else if ctx.Err() == nil {
			s.log.Warn("Read queue config", "error", err)
		}
		if err := wait.Sleep(ctx, bo.Next()); err != nil {
			return err
		}
	}
}

// fail stops the server for good on a layout this build cannot read (err, a
// *broker.LayoutError): it ends Run's context and, when Run created the
// client, closes it, so no goroutine of this process writes to Redis again.
func (s *Server) fail(err error) {
	if !s.failed.CompareAndSwap(nil, &err) {
		return
	}
	s.log.Error("Stopping: this worker cannot read the queue's Redis layout", "error", err)
	if s.ownsRDB {
		_ = s.rdb.Close()
	}
	s.stopRun(err)
}

// failure is the error fail stopped the server with, or nil.
func (s *Server) failure() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *Server) serveMetrics() (func(), error) {
	if s.cfg.MetricsAddr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", s.cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("worker: metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	if metrics := s.metrics.Handler(); metrics != nil {
		if s.cfg.MetricsMiddleware != nil {
			if metrics, err = s.cfg.MetricsMiddleware(metrics); err != nil {
				_ = ln.Close()
				return nil, fmt.Errorf("worker: metrics middleware: %w", err)
			}
		}
		mux.Handle("/metrics", metrics)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.Status() == StatusStopped {
			http.Error(w, "stopped", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		st := s.Status()
		if st != StatusReady && st != StatusBusy {
			http.Error(w, st, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(st + "\n"))
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	s.log.Info("Serving metrics", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}, nil
}
