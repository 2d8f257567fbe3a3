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

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/internal/delivery"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/workermetrics"
)

// Workers: drain of a pre-submitted backlog of no-op tasks with 32 execution
// slots (dtq: one pkg/worker Server with Concurrency 32; asynq: one Server with
// Concurrency 32), and idle latency from submit to handler start over sequential
// tasks (p50/p99 printed after the table row). Submission is untimed.
func init() {
	register(Case{Group: "Workers", Name: "drain 20k no-op, 32 slots", Dtq: dtqDrain, Peer: asynqDrain})
	register(Case{Group: "Workers", Name: "drain 20k no-op via HTTP sidecar, 32 slots", Dtq: sidecarDrain, Peer: asynqDrain})
	register(Case{Group: "Workers", Name: "drain 20k no-op, stream floor", Dtq: floorDrain, Peer: asynqDrain})
	register(Case{Group: "Workers", Name: "idle latency (seq tasks/s)", Dtq: dtqLatency, Peer: asynqLatency})
}

const (
	drainTasks   = 20000
	drainSlots   = 32
	latencyTasks = 200
)

var workerQueue = broker.QueueRef{Namespace: "bench", Name: "workers"}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// dtqQueue creates the workers' queue with flow control fc (nil: none).
func dtqQueue(ctx context.Context, rdb redis.UniversalClient, depth int, fc *broker.FlowControl) (*broker.Broker, error) {
	b := broker.New(rdb)
	cfg := broker.DefaultQueueConfig()
	cfg.MaxDepth = int64(depth) * 2
	cfg.Flow = fc
	return b, b.EnsureQueue(ctx, workerQueue, cfg)
}

// dtqServer runs a worker.Server for h until the returned stop is called.
func dtqServer(rdb redis.UniversalClient, h worker.Handler) (stop func(), err error) {
	srv, err := worker.NewServer(worker.Config{Redis: rdb, Namespace: workerQueue.Namespace, Queue: workerQueue.Name,
		Concurrency: drainSlots, Logger: quietLog(), Metrics: workermetrics.New()}, h) // measured as the reference worker is
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Run(ctx); close(done) }()
	return func() { cancel(); <-done }, nil
}

func dtqDrain(ctx context.Context, p Params) (int, time.Duration, error) {
	return drainThrough(ctx, p, "dtq", backlog{}, noopServer)
}

// noopServer runs a worker.Server whose noop handler calls done.
func noopServer(rdb redis.UniversalClient, done func()) (func(), error) {
	mux := worker.NewMux()
	mux.HandleFunc("noop", func(ctx context.Context, t *worker.Task) (any, error) {
		done()
		return nil, nil
	})
	return dtqServer(rdb, mux)
}

// sidecarDrain drains through the HTTP delivery sidecar (delivery.Run, the
// code of `worker delivery`) to a minimal net/http handler on loopback that
// answers 200 with no body.
func sidecarDrain(ctx context.Context, p Params) (int, time.Duration, error) {
	return drainThrough(ctx, p, "dtq-sidecar", backlog{}, func(rdb redis.UniversalClient, done func()) (func(), error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			done()
			w.WriteHeader(http.StatusOK)
		})}
		go func() { _ = app.Serve(ln) }()
		rctx, cancel := context.WithCancel(context.Background())
		fin := make(chan struct{})
		go func() {
			defer close(fin)
			_ = delivery.Run(rctx, worker.Config{Redis: rdb, Namespace: workerQueue.Namespace, Queue: workerQueue.Name,
				Concurrency: drainSlots, Logger: quietLog()}, delivery.Config{HandlerURL: "http://" + ln.Addr().String() + "/"})
		}()
		return func() { cancel(); <-fin; _ = app.Close() }, nil
	})
}

// backlog is what a drain submits to: the queue's flow control (nil: none)
// and the flow key of task i (nil: none).
type backlog struct {
	flow *broker.FlowControl
	key  func(i int) string
}

// drainThrough pre-submits the backlog, then times start's server (which
// calls done once per task run) until the queue is empty.
func drainThrough(ctx context.Context, p Params, who string, bl backlog, start func(rdb redis.UniversalClient, done func()) (func(), error)) (int, time.Duration, error) {
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, PoolSize: drainSlots + 16})
	defer rdb.Close()
	b, err := dtqQueue(ctx, rdb, drainTasks, bl.flow)
	if err != nil {
		return 0, 0, err
	}
	submitted := submitCommands(ctx, p.Addr, who)
	if _, err := parallel(drainTasks, p.Producers, func(i int) error {
		req := broker.SubmitRequest{Type: "noop", Payload: p.Payload, Priority: 5}
		if bl.key != nil {
			req.FlowKey = bl.key(i)
		}
		_, err := b.Submit(ctx, workerQueue, req)
		return err
	}); err != nil {
		return 0, 0, err
	}
	submitted()
	var n atomic.Int64
	fin := make(chan struct{})
	done := func() {
		if n.Add(1) == drainTasks {
			close(fin)
		}
	}
	report := drainCPU(ctx, p.Addr, who)
	begin := time.Now()
	stop, err := start(rdb, done)
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	select {
	case <-fin:
	case <-time.After(5 * time.Minute):
		return 0, 0, fmt.Errorf("%s drain: %d of %d after 5m", who, n.Load(), drainTasks)
	}
	// Completion of the last tasks is part of the drain: wait until nothing is in flight.
	for {
		st, err := b.Stats(ctx, workerQueue)
		if err != nil {
			return 0, 0, err
		}
		if st.Depth == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	d := time.Since(begin)
	report(d)
	return drainTasks, d, nil
}

// floorDrain is not dtq: it is the least Redis work of a drain through a
// stream and a consumer group with 32 tasks in flight, and few round trips:
// 4 readers, each sending the XACK and XDEL of the 8 entries it read last and
// the XREADGROUP (COUNT 8) of the next ones in one pipeline. No script, no
// task hash, no attempt, lease, event or counter, no hand-off to executors.
// dtq's worker coalesces its slots' completions and next reads the same way
// (CompleteNext), batches of a few; the gap between this row and dtq's is the
// per-task work of the scripts and the worker, not the round trips.
func floorDrain(ctx context.Context, p Params) (int, time.Duration, error) {
	const stream, group, readers = "floor:stream", "g", 4
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, PoolSize: drainSlots + 16})
	defer rdb.Close()
	if err := rdb.XGroupCreateMkStream(ctx, stream, group, "0").Err(); err != nil {
		return 0, 0, err
	}
	if _, err := parallel(drainTasks, p.Producers, func(i int) error {
		return rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"t", "noop", "p", p.Payload}}).Err()
	}); err != nil {
		return 0, 0, err
	}
	report := drainCPU(ctx, p.Addr, "floor")
	begin := time.Now()
	var n atomic.Int64
	errs := make(chan error, readers)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() {
			read := &redis.XReadGroupArgs{Group: group, Consumer: "c" + strconv.Itoa(r), Streams: []string{stream, ">"},
				Count: drainSlots / readers, Block: -1}
			var prev []string
			for {
				var next *redis.XStreamSliceCmd
				_, err := rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
					if len(prev) > 0 {
						pl.XAck(ctx, stream, group, prev...)
						pl.XDel(ctx, stream, prev...)
					}
					next = pl.XReadGroup(ctx, read)
					return nil
				})
				if errors.Is(err, redis.Nil) {
					return // the stream is empty, the last entries acknowledged
				}
				if err != nil {
					errs <- err
					return
				}
				prev = prev[:0]
				for _, m := range next.Val()[0].Messages {
					prev = append(prev, m.ID)
				}
				n.Add(int64(len(prev)))
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	if n.Load() != drainTasks {
		return 0, 0, fmt.Errorf("floor drain: %d of %d", n.Load(), drainTasks)
	}
	d := time.Since(begin)
	report(d)
	return drainTasks, d, nil
}

func asynqDrain(ctx context.Context, p Params) (int, time.Duration, error) {
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: p.Addr})
	defer c.Close()
	if _, err := parallel(drainTasks, p.Producers, func(i int) error {
		_, err := c.EnqueueContext(ctx, asynq.NewTask("noop", p.Payload), asynq.Queue("workers"))
		return err
	}); err != nil {
		return 0, 0, err
	}
	var n atomic.Int64
	fin := make(chan struct{})
	mux := asynq.NewServeMux()
	mux.HandleFunc("noop", func(ctx context.Context, t *asynq.Task) error {
		if n.Add(1) == drainTasks {
			close(fin)
		}
		return nil
	})
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: p.Addr, PoolSize: drainSlots + 16}, asynq.Config{
		Concurrency: drainSlots, Queues: map[string]int{"workers": 1}, LogLevel: asynq.FatalLevel})
	report := drainCPU(ctx, p.Addr, "asynq")
	start := time.Now()
	if err := srv.Start(mux); err != nil {
		return 0, 0, err
	}
	defer srv.Shutdown()
	select {
	case <-fin:
	case <-time.After(5 * time.Minute):
		return 0, 0, fmt.Errorf("asynq drain: %d of %d after 5m", n.Load(), drainTasks)
	}
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: p.Addr})
	defer insp.Close()
	for {
		qi, err := insp.GetQueueInfo("workers")
		if err != nil {
			return 0, 0, err
		}
		if qi.Pending == 0 && qi.Active == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	d := time.Since(start)
	report(d)
	return drainTasks, d, nil
}

// drainCPU starts measuring, with -v only, the CPU time of a drain alone
// (submission excluded) of the Redis at addr and of the bench process (the
// worker): how busy each was. Call it before the drain's clock starts; the
// returned func prints the figures for a drain of d.
func drainCPU(ctx context.Context, addr, who string) func(d time.Duration) {
	if !*verbose {
		return func(time.Duration) {}
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	cpu0, own0, cmd0 := redisCPU(ctx, rdb), ownCPU(), redisCommands(ctx, rdb)
	return func(d time.Duration) {
		defer rdb.Close()
		cpu, own, cmds := redisCPU(ctx, rdb)-cpu0, ownCPU()-own0, redisCommands(ctx, rdb)-cmd0
		fmt.Fprintf(os.Stderr, "  %s drain: redis cpu %.2fs in %s (%.0f%% busy, %.1f us/task, %.1f commands/task), worker process cpu %.2fs (%.0f%%, %.1f us/task)\n",
			who, cpu, d.Round(time.Millisecond), 100*cpu/d.Seconds(), cpu*1e6/drainTasks, float64(cmds)/drainTasks, own, 100*own/d.Seconds(), own*1e6/drainTasks)
	}
}

// submitCommands starts counting, with -v only, the Redis commands of a
// drain's submission; the returned func prints them per task.
func submitCommands(ctx context.Context, addr, who string) func() {
	if !*verbose {
		return func() {}
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	cmd0 := redisCommands(ctx, rdb)
	return func() {
		defer rdb.Close()
		fmt.Fprintf(os.Stderr, "  %s submit: %.1f commands/task\n", who, float64(redisCommands(ctx, rdb)-cmd0)/drainTasks)
	}
}

// dtqLatencies holds the last dtq run's sorted latencies for the asynq run's
// ratio; dtqSubmitCall and dtqAfterSubmit split them (the Submit call,
// then its return to the handler's start), and dtqReadStart is the round trip
// of the worker's read-and-start call on an entry that is ready.
var dtqLatencies, dtqSubmitCall, dtqAfterSubmit, dtqReadStart []time.Duration

// measureLatency returns the sorted submit -> handler start latencies, their
// total, and (sorted) the submit calls' own durations. With started nil it
// times the calls alone: the first result is then the calls' durations.
func measureLatency(submit func(i int) error, started <-chan time.Time) ([]time.Duration, time.Duration, []time.Duration, error) {
	time.Sleep(1500 * time.Millisecond) // let the worker go idle (blocked / polling)
	var ds, calls []time.Duration
	var total time.Duration
	for i := range latencyTasks {
		t0 := time.Now()
		if err := submit(i); err != nil {
			return nil, 0, nil, err
		}
		calls = append(calls, time.Since(t0))
		if started == nil {
			ds = append(ds, calls[i])
			total += calls[i]
			time.Sleep(2 * time.Millisecond)
			continue
		}
		select {
		case t1 := <-started:
			ds = append(ds, t1.Sub(t0))
			total += time.Since(t0)
		case <-time.After(30 * time.Second):
			return nil, 0, nil, fmt.Errorf("task %d not started after 30s", i)
		}
		time.Sleep(2 * time.Millisecond) // idle again before the next one
	}
	slices.Sort(ds)
	slices.Sort(calls)
	return ds, total, calls, nil
}

func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

func dtqLatency(ctx context.Context, p Params) (int, time.Duration, error) {
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, PoolSize: drainSlots + 16})
	defer rdb.Close()
	b, err := dtqQueue(ctx, rdb, latencyTasks, nil)
	if err != nil {
		return 0, 0, err
	}
	started := make(chan time.Time, 1)
	mux := worker.NewMux()
	mux.HandleFunc("ping", func(ctx context.Context, t *worker.Task) (any, error) { started <- time.Now(); return nil, nil })
	stop, err := dtqServer(rdb, mux)
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	ds, total, calls, err := measureLatency(func(i int) error {
		_, err := b.Submit(ctx, workerQueue, broker.SubmitRequest{Type: "ping", Payload: p.Payload, Priority: 5})
		return err
	}, started)
	stop()
	if err != nil {
		return 0, 0, err
	}
	dtqLatencies, dtqSubmitCall = ds, calls
	dtqAfterSubmit = dtqAfterSubmit[:0]
	for i := range ds { // by rank: a split of the quantiles, not of one task
		dtqAfterSubmit = append(dtqAfterSubmit, ds[i]-calls[i])
	}
	if dtqReadStart, err = readStartRoundTrips(ctx, b); err != nil {
		return 0, 0, err
	}
	pings, _, _, err := measureLatency(func(int) error { return rdb.Ping(ctx).Err() }, nil)
	if err != nil {
		return 0, 0, err
	}
	fmt.Fprintf(os.Stdout, "\nWorkers idle latency, submit -> handler start, %d sequential tasks:\n", latencyTasks)
	fmt.Fprintf(os.Stdout, "  dtq    %s\n", quantiles(dtqLatencies))
	fmt.Fprintf(os.Stdout, "    of which the Submit call          %s\n", quantiles(dtqSubmitCall))
	fmt.Fprintf(os.Stdout, "    Submit return -> handler start    %s\n", quantiles(dtqAfterSubmit))
	fmt.Fprintf(os.Stdout, "    (a ReadStart round trip, ready)   %s\n", quantiles(dtqReadStart))
	fmt.Fprintf(os.Stdout, "    (a PING round trip, idle)         %s\n", quantiles(pings))
	return latencyTasks, total, nil
}

func quantiles(ds []time.Duration) string {
	return fmt.Sprintf("p50 %8s  p99 %8s", pct(ds, 0.50).Round(10*time.Microsecond), pct(ds, 0.99).Round(10*time.Microsecond))
}

// readStartRoundTrips times, with no worker running, latencyTasks calls of
// the worker's read-and-start (ReadStart) on one ready entry each, sorted.
func readStartRoundTrips(ctx context.Context, b *broker.Broker) ([]time.Duration, error) {
	var out []time.Duration
	for range latencyTasks {
		if _, err := b.Submit(ctx, workerQueue, broker.SubmitRequest{Type: "ping", Priority: 5}); err != nil {
			return nil, err
		}
		t0 := time.Now()
		ss, err := b.ReadStart(ctx, workerQueue, "probe", "probe", 1, 0)
		if err != nil || len(ss) != 1 {
			return nil, fmt.Errorf("read-start probe: %d entries, error %s", len(ss), fmt.Sprint(err))
		}
		out = append(out, time.Since(t0))
	}
	slices.Sort(out)
	return out, nil
}

func asynqLatency(ctx context.Context, p Params) (int, time.Duration, error) {
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: p.Addr})
	defer c.Close()
	started := make(chan time.Time, 1)
	mux := asynq.NewServeMux()
	mux.HandleFunc("ping", func(ctx context.Context, t *asynq.Task) error { started <- time.Now(); return nil })
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: p.Addr}, asynq.Config{
		Concurrency: drainSlots, Queues: map[string]int{"workers": 1}, LogLevel: asynq.FatalLevel})
	if err := srv.Start(mux); err != nil {
		return 0, 0, err
	}
	defer srv.Shutdown()
	ds, total, _, err := measureLatency(func(i int) error {
		_, err := c.EnqueueContext(ctx, asynq.NewTask("ping", p.Payload), asynq.Queue("workers"))
		return err
	}, started)
	if err == nil {
		fmt.Fprintf(os.Stdout, "  asynq  %s\n", quantiles(ds))
		if a := pct(ds, 0.50); a > 0 && len(dtqLatencies) > 0 {
			fmt.Fprintf(os.Stdout, "  p50 ratio asynq/dtq %.0fx\n\n", float64(a)/float64(pct(dtqLatencies, 0.50)))
		}
	}
	return latencyTasks, total, err
}
