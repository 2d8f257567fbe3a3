package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/internal/broker"
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
	promoteLimit   = 100                    // schedule members promoted per call
	maxPromoteWait = time.Second            // longest scheduler sleep
	handlerGrace   = time.Second            // wait for a handler to return after its context ended
	opTimeout      = 10 * time.Second       // per engine call
)

var (
	errCancelRequested = errors.New("worker: task cancel requested")
	errInterrupted     = errors.New("worker: drain budget exhausted; task left unacknowledged for redelivery")
)

// Server runs handlers for one queue. Create it with NewServer and call Run once.
type Server struct {
	cfg     Config
	h       Handler
	rdb     redis.UniversalClient
	ownsRDB bool
	b       *broker.Broker // reads, heartbeats, housekeeping
	q       broker.QueueRef
	log     *slog.Logger
	m       *metrics

	sem chan struct{} // execution slots; a slot is held from read to completion

	mu        sync.Mutex
	inflight  map[string]*execution // by stream message ID
	status    string
	hostname  string
	startedAt time.Time

	wg             sync.WaitGroup // executions
	defaultTimeout time.Duration
	promoteNow     chan struct{}
	ran            atomic.Bool
}

type execution struct {
	d           broker.Delivery
	started     *broker.StartResult     // set when the read already started it (ReadStart)
	cancel      context.CancelCauseFunc // set once the handler is about to run
	cancelReq   bool
	interrupted bool
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
	s := &Server{
		cfg:        cfg,
		h:          h,
		rdb:        cfg.Redis,
		q:          broker.QueueRef{Namespace: cfg.Namespace, Name: cfg.Queue},
		log:        cfg.Logger.With("worker_id", cfg.WorkerID, "queue", cfg.Namespace+"/"+cfg.Queue),
		m:          newMetrics(),
		sem:        make(chan struct{}, cfg.Concurrency),
		inflight:   map[string]*execution{},
		status:     StatusStarting,
		promoteNow: make(chan struct{}, 1),
	}
	if s.rdb == nil {
		opt, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("worker: %s: %w", EnvRedisURL, err)
		}
		// One blocking read, Start (reclaims)+Complete per slot, heartbeat, reclaim, scheduler, cancel poll.
		if min := cfg.Concurrency + 8; opt.PoolSize < min {
			opt.PoolSize = max(min, 10*runtime.GOMAXPROCS(0))
		}
		s.rdb = redis.NewClient(opt)
		s.ownsRDB = true
	}
	s.b = broker.New(s.rdb)
	s.hostname, _ = os.Hostname()
	return s, nil
}

// Redis returns the server's Redis client, for handlers that keep their own
// state there (IdempotentOperation). Closed when Run returns if the server
// created it from RedisURL.
func (s *Server) Redis() redis.UniversalClient { return s.rdb }

// WorkerID returns the consumer name.
func (s *Server) WorkerID() string { return s.cfg.WorkerID }

// Registry returns the server's private Prometheus registry.
func (s *Server) Registry() *prometheus.Registry { return s.m.reg }

// MetricsHandler serves the server's metrics in the Prometheus text format.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{Registry: s.m.reg})
}

// Status returns the current status (starting, ready, busy, draining, stopped).
func (s *Server) Status() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

func (s *Server) statusLocked() string {
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
// to the drain timeout for in-flight handlers, cancels the rest without
// acknowledging them, removes its consumer when it holds no pending entries and
// returns nil. It returns an error only when it cannot start (the metrics
// address is taken, or it is called twice). While the queue does not exist yet
// (the controller has not created it) Run waits for it.
func (s *Server) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return errors.New("worker: Server.Run called twice")
	}
	s.startedAt = time.Now()
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

	if !s.waitQueue(ctx) {
		bgCancel()
		bg.Wait()
		s.finalHeartbeat()
		return nil
	}
	s.setStatus(StatusReady)
	s.log.Info("worker ready", "concurrency", s.cfg.Concurrency, "visibility_timeout", s.cfg.VisibilityTimeout.String(),
		"heartbeat_interval", s.cfg.HeartbeatInterval.String(), "drain_timeout", s.cfg.DrainTimeout.String(), "types", typesOf(s.h))
	s.heartbeat(bgCtx)

	// Loops that stop at the start of the drain.
	stop := make(chan struct{})
	var fg sync.WaitGroup
	goLoop(&fg, func() { s.readLoop(stop) })
	goLoop(&fg, func() { s.schedulerLoop(stop) })

	<-ctx.Done()
	s.setStatus(StatusDraining)
	s.log.Info("draining", "inflight", s.inflightCount(), "budget", s.cfg.DrainTimeout.String())
	s.heartbeat(bgCtx)
	close(stop)
	fg.Wait() // deliveries already read are dispatched and count as in flight

	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	timer := time.NewTimer(s.cfg.DrainTimeout)
	select {
	case <-done:
		timer.Stop()
	case <-timer.C:
		n := s.interruptAll()
		s.log.Warn("drain budget exhausted; cancelled handlers are left unacknowledged for redelivery", "interrupted", n)
		<-done
	}
	bgCancel()
	bg.Wait()

	rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := s.b.RemoveConsumer(rctx, s.q, s.cfg.WorkerID); err != nil {
		if errors.Is(err, broker.ErrConsumerBusy) {
			s.log.Info("consumer kept: it holds pending entries that peers will reclaim")
		} else {
			s.log.Warn("remove consumer", "err", err)
		}
	}
	s.finalHeartbeat()
	s.log.Info("worker stopped")
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

// waitQueue reads the queue config, retrying while the queue does not exist or
// Redis is unreachable. False when ctx ended first.
func (s *Server) waitQueue(ctx context.Context) bool {
	bo := newBackoff()
	for {
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		qc, err := s.b.QueueConfig(cctx, s.q)
		cancel()
		if err == nil {
			s.defaultTimeout = qc.DefaultTimeout
			if s.defaultTimeout <= 0 {
				s.defaultTimeout = broker.DefaultQueueConfig().DefaultTimeout
			}
			return true
		}
		if errors.Is(err, broker.ErrQueueNotFound) {
			s.log.Info("waiting for the queue to be created")
		} else if ctx.Err() == nil {
			s.log.Warn("read queue config", "err", err)
		}
		if !sleepCtx(ctx, bo.next()) {
			return false
		}
	}
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
	mux.Handle("/metrics", s.MetricsHandler())
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
	s.log.Info("serving metrics", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}, nil
}

// ---- slots ----

func (s *Server) tryAcquire() bool {
	select {
	case s.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *Server) release(n int) {
	for range n {
		<-s.sem
	}
}

// ---- loops ----

// readLoop holds one slot per entry it asks for, so it never reads more than
// the free slots (the original prefetched per band). New entries are read and
// started in one engine call (ReadStart), so a slot waits for two round trips
// per task (read+start, complete) instead of three; entries that do not run
// give their slot back at once. The read blocks in Redis, so an idle worker
// picks up a new entry as soon as it is added. Every
// max(0.5s, visibility timeout/2), jittered, the slots first go to reclaiming
// entries idle longer than the visibility timeout (a dead worker's).
func (s *Server) readLoop(stop <-chan struct{}) {
	bo := newBackoff()
	period := max(500*time.Millisecond, s.cfg.VisibilityTimeout/2)
	nextReclaim := time.Now().Add(jitter(period, 0.2))
	for {
		select {
		case s.sem <- struct{}{}:
		case <-stop:
			return
		}
		select { // a stop that raced with the slot
		case <-stop:
			s.release(1)
			return
		default:
		}
		n := 1
		for n < s.cfg.Concurrency && s.tryAcquire() {
			n++
		}
		if time.Now().After(nextReclaim) {
			nextReclaim = time.Now().Add(jitter(period, 0.2))
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			ds, err := s.b.Reclaim(ctx, s.q, s.cfg.WorkerID, s.cfg.VisibilityTimeout, n)
			cancel()
			if err != nil {
				s.log.Warn("reclaim", "err", err)
			}
			for _, d := range ds {
				s.log.Info("reclaimed entry", "task_id", d.TaskID, "entry_attempt", d.Attempt)
			}
			if len(ds) > 0 {
				s.dispatchAll(ds, n)
				continue
			}
		}
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), readBlock+opTimeout)
		ds, err := s.b.ReadStart(ctx, s.q, s.cfg.WorkerID, s.cfg.WorkerID, n, min(readBlock, max(time.Millisecond, time.Until(nextReclaim))))
		cancel()
		if err != nil {
			s.release(n)
			s.log.Warn("read", "err", err)
			if !sleepStop(stop, bo.next()) {
				return
			}
			continue
		}
		bo.reset()
		s.dispatchStarted(ds, n)
		if len(ds) == 0 && time.Since(began) < time.Millisecond {
			// Read returned at once with nothing: do not spin.
			if !sleepStop(stop, 10*time.Millisecond) {
				return
			}
		}
	}
}

// dispatchAll runs ds holding n slots: extra slots are released; a delivery
// beyond n (an engine returning more than asked) waits for a slot.
func (s *Server) dispatchAll(ds []broker.Delivery, n int) {
	for i, d := range ds {
		if i >= n {
			s.sem <- struct{}{}
		}
		s.dispatch(d)
	}
	if len(ds) < n {
		s.release(n - len(ds))
	}
}

// dispatchStarted runs the entries ReadStart started, holding n slots: an entry
// that does not run (already acknowledged by the read) or failed to start (left
// pending for reclaim) gives its slot back at once.
func (s *Server) dispatchStarted(ss []broker.Started, n int) {
	run := 0
	for i := range ss {
		st := &ss[i]
		switch {
		case st.Err != nil:
			// The entry stays pending; it is reclaimed after the visibility timeout.
			s.log.Warn("start", "task_id", st.TaskID, "message_id", st.MessageID, "err", st.Err)
		case !st.Run:
			s.notRun(st.Delivery, st.StartResult)
		default:
			if run >= n {
				s.sem <- struct{}{}
			}
			run++
			s.dispatchExec(&execution{d: st.Delivery, started: &st.StartResult})
		}
	}
	if run < n {
		s.release(n - run)
	}
}

func (s *Server) notRun(d broker.Delivery, sr broker.StartResult) {
	s.log.Debug("entry not run", "task_id", d.TaskID, "message_id", d.MessageID, "reason", sr.Reason, "state", string(sr.Task.State))
	if sr.Task.State == broker.StateDeadLettered {
		s.m.deadLettered.WithLabelValues(s.q.String(), sr.Task.Type).Inc()
	}
}

// schedulerLoop promotes due delayed and retrying tasks. PromoteDue is one
// atomic script, so every worker runs it and none needs a leader lock.
func (s *Server) schedulerLoop(stop <-chan struct{}) {
	bo := newBackoff()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		moved, next, err := s.b.PromoteDue(ctx, s.q, promoteLimit)
		cancel()
		wait := maxPromoteWait
		switch {
		case err != nil:
			s.log.Warn("promote due tasks", "err", err)
			wait = bo.next()
		case moved >= promoteLimit:
			wait = 0
			bo.reset()
		case !next.IsZero():
			wait = min(maxPromoteWait, max(5*time.Millisecond, time.Until(next)))
			bo.reset()
		}
		if wait == 0 {
			select {
			case <-stop:
				return
			default:
				continue
			}
		}
		t := time.NewTimer(jitter(wait, 0.05))
		select {
		case <-stop:
			t.Stop()
			return
		case <-s.promoteNow:
			t.Stop()
			// a retry was just scheduled: its due time may be sooner than wait
		case <-t.C:
		}
	}
}

func (s *Server) pokeScheduler() {
	select {
	case s.promoteNow <- struct{}{}:
	default:
	}
}

// heartbeatLoop writes the worker record and touches every in-flight entry so
// the visibility timeout never reclaims a live worker's work.
func (s *Server) heartbeatLoop(ctx context.Context) {
	for {
		if !sleepCtx(ctx, jitter(s.cfg.HeartbeatInterval, 0.1)) {
			return
		}
		s.heartbeat(ctx)
	}
}

func (s *Server) heartbeat(ctx context.Context) {
	s.mu.Lock()
	info := broker.WorkerInfo{
		ID: s.cfg.WorkerID, Hostname: s.hostname, Concurrency: s.cfg.Concurrency,
		Active: len(s.inflight), Status: s.statusLocked(), StartedAt: s.startedAt, LastHeartbeat: time.Now(),
	}
	ds := make([]broker.Delivery, 0, len(s.inflight))
	for _, e := range s.inflight {
		if !e.interrupted {
			ds = append(ds, e.d)
		}
	}
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := s.b.Heartbeat(cctx, s.q, info, s.cfg.HeartbeatInterval); err != nil && ctx.Err() == nil {
		s.log.Warn("heartbeat", "err", err)
	}
	if len(ds) > 0 {
		if err := s.b.Touch(cctx, s.q, s.cfg.WorkerID, ds); err != nil && ctx.Err() == nil {
			s.log.Warn("touch in-flight entries", "err", err)
		}
	}
}

// cancelLoop asks, in one call, which in-flight tasks have a cancel request and
// cancels their handlers' contexts.
func (s *Server) cancelLoop(ctx context.Context) {
	for {
		if !sleepCtx(ctx, cancelPoll) {
			return
		}
		s.mu.Lock()
		ids := make([]string, 0, len(s.inflight))
		byID := make(map[string]*execution, len(s.inflight))
		for _, e := range s.inflight {
			if !e.cancelReq {
				ids = append(ids, e.d.TaskID)
				byID[e.d.TaskID] = e
			}
		}
		s.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		req, err := s.b.CancelRequested(cctx, s.q, ids)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("poll cancel requests", "err", err)
			}
			continue
		}
		s.mu.Lock()
		for _, id := range req {
			if e := byID[id]; e != nil && !e.cancelReq {
				e.cancelReq = true
				if e.cancel != nil {
					e.cancel(errCancelRequested)
				}
			}
		}
		s.mu.Unlock()
	}
}

func (s *Server) interruptAll() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.inflight {
		if !e.interrupted {
			e.interrupted = true
			n++
			if e.cancel != nil {
				e.cancel(errInterrupted)
			}
		}
	}
	return n
}

func (s *Server) inflightCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight)
}

// ---- execution ----

// dispatch runs d (a reclaimed entry, started by process) in its own
// goroutine; the caller holds a slot for it, which the goroutine releases.
func (s *Server) dispatch(d broker.Delivery) { s.dispatchExec(&execution{d: d}) }

// dispatchExec runs e in its own goroutine; the caller holds a slot for it.
func (s *Server) dispatchExec(e *execution) {
	d := e.d
	s.mu.Lock()
	s.inflight[d.MessageID] = e
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.release(1)
		defer func() {
			s.mu.Lock()
			delete(s.inflight, d.MessageID)
			s.mu.Unlock()
		}()
		s.process(e)
	}()
}

func (s *Server) process(e *execution) {
	d := e.d
	log := s.log.With("task_id", d.TaskID, "message_id", d.MessageID)
	var sr broker.StartResult
	var err error
	if e.started != nil {
		sr = *e.started
	} else {
		err = retryConn(func(ctx context.Context) (err error) {
			sr, err = s.b.Start(ctx, s.q, s.cfg.WorkerID, d)
			return err
		})
	}
	if err != nil {
		// The entry stays pending; it is reclaimed after the visibility timeout.
		log.Warn("start", "err", err)
		return
	}
	if !sr.Run {
		s.notRun(d, sr)
		return
	}
	ti := sr.Task
	lbl := []string{s.q.String(), ti.Type}
	timeout := ti.Timeout
	if timeout <= 0 {
		timeout = s.defaultTimeout
	}
	startedAt := time.Now()
	task := &Task{
		ID: ti.ID, Type: ti.Type, Queue: s.q.String(), Payload: ti.Payload, Attempt: ti.Attempt,
		MaxAttempts: ti.MaxAttempts, IdempotencyKey: ti.IdempotencyKey, Priority: ti.Priority,
		Deadline: startedAt.Add(timeout),
	}
	execCtx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	s.mu.Lock()
	if e.interrupted {
		// The drain budget ran out before the handler ran: leave the task
		// Running with its entry pending, exactly a crash. A peer reclaims it
		// after the visibility timeout and runs it as attempt+1.
		s.mu.Unlock()
		log.Warn("drain budget exhausted before the handler ran; left for redelivery", "attempt", ti.Attempt)
		return
	}
	e.cancel = cancel
	switch {
	case e.cancelReq:
		cancel(errCancelRequested)
	}
	s.mu.Unlock()
	ctx, dcancel := context.WithDeadline(execCtx, task.Deadline)
	defer dcancel()

	if !ti.AvailableAt.IsZero() {
		s.m.wait.WithLabelValues(lbl...).Observe(max(0, startedAt.Sub(ti.AvailableAt).Seconds()))
	}
	s.m.started.WithLabelValues(lbl...).Inc()
	s.m.inflight.WithLabelValues(s.q.String()).Inc()
	res, herr := s.invoke(ctx, task)
	s.m.inflight.WithLabelValues(s.q.String()).Dec()
	s.m.execution.WithLabelValues(lbl...).Observe(time.Since(startedAt).Seconds())

	cause := context.Cause(ctx)
	if errors.Is(cause, errInterrupted) {
		// Never acknowledge interrupted work: the entry stays pending and is
		// redelivered (attempt+1) after the visibility timeout.
		log.Warn("handler interrupted by drain; left for redelivery", "attempt", task.Attempt)
		return
	}
	var out broker.Outcome
	switch {
	case herr == nil:
		data, err := marshalResult(res)
		if err != nil {
			out = broker.Outcome{Err: err.Error(), ErrorClass: ClassBadResult}
		} else {
			out = broker.Outcome{Result: data}
		}
	case errors.Is(cause, errCancelRequested):
		out = broker.Outcome{Err: "cancelled: " + herr.Error(), ErrorClass: "Cancelled", Cancelled: true}
	case errors.Is(cause, context.DeadlineExceeded) && !time.Now().Before(task.Deadline):
		out = broker.Outcome{Err: fmt.Sprintf("deadline exceeded after %s: %v", timeout, herr), ErrorClass: ClassTimeout, Retryable: true}
	default:
		retry, class := classify(herr)
		out = broker.Outcome{Err: herr.Error(), ErrorClass: class, Retryable: retry}
	}
	if out.Err != "" && !out.Cancelled {
		s.m.failed.WithLabelValues(lbl...).Inc()
	}
	var state broker.State
	err = retryConn(func(ctx context.Context) (err error) {
		state, err = s.b.Complete(ctx, s.q, d, out)
		return err
	})
	if err != nil {
		log.Error("complete; the entry stays pending and will be redelivered", "err", err)
		return
	}
	switch state {
	case broker.StateSucceeded:
		s.m.succeeded.WithLabelValues(lbl...).Inc()
	case broker.StateRetrying:
		s.m.retried.WithLabelValues(lbl...).Inc()
		s.pokeScheduler()
	case broker.StateDeadLettered:
		s.m.deadLettered.WithLabelValues(lbl...).Inc()
	case broker.StateCancelled:
		s.m.cancelled.WithLabelValues(lbl...).Inc()
	}
	if out.Err != "" {
		log.Info("task attempt failed", "type", ti.Type, "attempt", task.Attempt, "class", out.ErrorClass,
			"retryable", out.Retryable, "state", string(state), "err", out.Err)
	} else {
		log.Debug("task done", "type", ti.Type, "attempt", task.Attempt, "state", string(state))
	}
}

type handlerResult struct {
	v   any
	err error
}

// invoke runs the handler, turning a panic into ErrPanic. When ctx ends first the
// handler gets handlerGrace to return; a handler that ignores its context is
// then abandoned (its goroutine keeps running, like asynq's).
func (s *Server) invoke(ctx context.Context, t *Task) (any, error) {
	ch := make(chan handlerResult, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("handler panicked", "task_id", t.ID, "type", t.Type, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				ch <- handlerResult{err: fmt.Errorf("%w: %v", ErrPanic, r)}
			}
		}()
		v, err := s.h.ProcessTask(ctx, t)
		ch <- handlerResult{v: v, err: err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
	}
	t0 := time.NewTimer(handlerGrace)
	defer t0.Stop()
	select {
	case r := <-ch:
		if r.err == nil && ctx.Err() != nil && context.Cause(ctx) != context.DeadlineExceeded {
			// cancelled or interrupted: a nil error does not mean it finished
			return nil, context.Cause(ctx)
		}
		return r.v, r.err
	case <-t0.C:
		s.log.Warn("handler ignored its context; abandoned", "task_id", t.ID, "type", t.Type)
		return nil, context.Cause(ctx)
	}
}

func marshalResult(v any) (json.RawMessage, error) {
	switch r := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if !json.Valid(r) {
			return nil, errors.New("handler result is not valid JSON")
		}
		return r, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("handler result: %w", err)
	}
	return data, nil
}

// retryConn runs an engine call, retrying connection errors a few times with a
// short backoff (a blip must not turn finished work into a redelivery).
func retryConn(f func(ctx context.Context) error) error {
	var err error
	for i := range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		err = f(ctx)
		cancel()
		if err == nil || !isConnErr(err) && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		time.Sleep(time.Duration(50<<i) * time.Millisecond)
	}
	return err
}

// ---- timing helpers ----

func jitter(d time.Duration, frac float64) time.Duration {
	return time.Duration(float64(d) * (1 + frac*(2*rand.Float64()-1)))
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func sleepStop(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

type backoff struct{ cur time.Duration }

func newBackoff() *backoff { return &backoff{} }

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = 100 * time.Millisecond
	} else {
		b.cur = min(2*b.cur, 2*time.Second)
	}
	return jitter(b.cur, 0.2)
}

func (b *backoff) reset() { b.cur = 0 }
