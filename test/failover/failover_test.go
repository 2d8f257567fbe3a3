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

// Package failover measures what a Redis Sentinel failover does to dtq's
// tasks: one master, one replica and three sentinels (redis-server
// --sentinel), producers submitting through the engine and workers of the
// worker SDK running them, all through a redis+sentinel:// URL, while the
// master is SIGKILLed mid-burst and Sentinel promotes the replica (and, in
// the two-failover variants, the same again with the restarted node). The
// ledger (ledger_test.go), kept in this process, counts acknowledged
// submissions that never ran and executions that ran twice; the workers' own
// dtq.complete spans (completions_test.go) say which completions a worker saw
// acknowledged, whose task hash and idempotency record must survive.
//
// The replica acknowledgement variants set the queue's ReplicaAcks, the
// config field the operator writes from a Queue's spec.durability.replicaAcks;
// the engine of the producers and of the worker SDK read it from Redis.
//
// TestFailover runs one failover with async replication and two failovers
// with replicaAcks 1 and checks what must hold; BenchmarkFailover repeats
// every variant and prints the table of docs/redis.md:
//
//	go test ./test/failover -run '^$' -bench Failover -benchtime 1x
package failover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redisconn"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/worker"
)

// variant is one way to run Redis and the engine through a failover.
type variant struct {
	name string
	// replicaAcks: the queue's ReplicaAcks (a Queue's
	// spec.durability.replicaAcks), with the default 1 s timeout.
	replicaAcks int
	// minReplicas: the data nodes refuse writes without a replica
	// (min-replicas-to-write 1, min-replicas-max-lag 10).
	minReplicas bool
	// failovers: how many times the current master is SIGKILLed.
	failovers int
}

var variants = []variant{
	{name: "async replication (default)", failovers: 1},
	{name: "async replication, two failovers", failovers: 2},
	{name: "min-replicas-to-write 1", minReplicas: true, failovers: 1},
	{name: "durability.replicaAcks 1", replicaAcks: 1, failovers: 1},
	{name: "durability.replicaAcks 1, two failovers", replicaAcks: 1, failovers: 2},
}

// outcome is what one failover did.
type outcome struct {
	acked        int             // submissions Redis acknowledged
	gaveUp       int             // submissions still failing when the producers stopped
	executions   int             // handler runs
	missing      int             // acknowledged tasks absent from the promoted master
	lost         []string        // acknowledged keys no handler ever ran
	duplicated   []string        // keys a handler ran more than once
	finished     int             // acknowledged keys whose completion a worker saw acknowledged
	lostFinished []string        // of those, the keys whose task hash or idempotency record is gone or not final
	unavailable  []time.Duration // per kill: from the kill to the next acknowledged submission
	failovers    int             // v.failovers, or more when Sentinel failed over again
}

const (
	producers  = 8
	visibility = 3 * time.Second
	q          = "q"
	ns         = "failover"
)

// runFailover starts the deployment, submits for a while, SIGKILLs the
// master, lets Sentinel promote the replica, restarts the old master (it
// rejoins as a replica, as a restarted pod would), submits a while more
// (v.failovers times; a second kill waits until the restarted node is a
// replica Sentinel can promote), and waits until the workers have run
// everything that is left.
func runFailover(t testing.TB, v variant) outcome {
	t.Helper()
	// AOF on every data node, as in production: a restarted node comes back
	// with its data, never empty (an empty node that Sentinel promoted in a
	// second failover would wipe the dataset).
	args := []string{"--appendonly", "yes", "--appendfsync", "everysec"}
	if v.minReplicas {
		args = append(args, "--min-replicas-to-write", "1", "--min-replicas-max-lag", "10")
	}
	opts := []redistest.Option{redistest.WithArgs(args...)}
	s := redistest.StartSentinel(t, 1, 3, opts...)
	addrs := s.SentinelAddrs()
	url := "redis+sentinel://" + addrs[0] + "/0?master_name=" + s.MasterName + "&addr=" + strings.Join(addrs[1:], "&addr=")
	rdb, err := redisconn.Config{URL: url}.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	eng := broker.New(rdb)
	ref := broker.QueueRef{Namespace: ns, Name: q}
	cfg := broker.DefaultQueueConfig()
	cfg.MaxDepth, cfg.VisibilityTimeout = 1_000_000, visibility
	cfg.ReplicaAcks = v.replicaAcks
	if err := eng.EnsureQueue(t.Context(), ref, cfg); err != nil {
		t.Fatal(err)
	}

	recordCompletions()
	l := newLedger()
	stopWorkers := startWorkers(t, url, l)
	defer stopWorkers()

	var out outcome
	var g gap
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var gaveUp atomic.Int64
	for p := range producers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond): // about 4,000 submissions/s in all
				}
				key := fmt.Sprintf("p%d-%06d", p, i)
				started := time.Now()
				if !submit(traced(t.Context()), eng, ref, key, l, stop) {
					gaveUp.Add(1)
					return
				}
				g.acked(started)
			}
		})
	}
	master := s.Master
	for i := range v.failovers {
		time.Sleep(1500 * time.Millisecond)
		if i > 0 { // the master now, which Sentinel may have changed again on its own
			master = s.WaitReplicas(t, 1)
		}
		g.kill()
		master.Kill()
		promoted := s.WaitPromoted(t, master)
		master.Restart()             // Sentinel makes it a replica of the new master
		d, ok := g.wait(time.Minute) // with replicaAcks, until the restarted node has resynced
		if !ok {
			close(stop)
			t.Fatalf("no submission was acknowledged within a minute of kill %d (promoted %s)", i+1, promoted.Addr)
		}
		out.unavailable = append(out.unavailable, d)
		master = promoted
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	out.gaveUp = int(gaveUp.Load())

	drain(t, eng, ref, l)
	out.executions = l.executions()
	out.lost, out.duplicated = l.check()
	l.mu.Lock()
	acked := make(map[string]string, len(l.acked))
	for k, id := range l.acked {
		acked[k] = id
	}
	l.mu.Unlock()
	out.acked = len(acked)
	if out.failovers, err = s.Failovers(); err != nil {
		t.Fatal(err)
	}
	for _, id := range acked {
		if _, err := eng.GetTask(t.Context(), ref, id); errors.Is(err, broker.ErrTaskNotFound) {
			out.missing++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if out.finished, out.lostFinished, err = lostFinished(t.Context(), eng, ref, acked, completed.acknowledged); err != nil {
		t.Fatal(err)
	}
	return out
}

// gap measures, for each kill, the time from the kill to the first
// acknowledged submission that started after it.
type gap struct {
	mu               sync.Mutex
	killed, firstAck time.Time
}

func (g *gap) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.killed, g.firstAck = time.Now(), time.Time{}
}

// acked notes a submission started at started that Redis acknowledged now.
func (g *gap) acked(started time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.killed.IsZero() && started.After(g.killed) && g.firstAck.IsZero() {
		g.firstAck = time.Now()
	}
}

// wait waits up to d for the first acknowledgement after the last kill.
func (g *gap) wait(d time.Duration) (time.Duration, bool) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		g.mu.Lock()
		killed, first := g.killed, g.firstAck
		g.mu.Unlock()
		if !first.IsZero() {
			return first.Sub(killed), true
		}
	}
	return 0, false
}

// lostFinished returns how many of the acknowledged tasks (key -> task ID)
// a worker saw completed (done), and the keys of those whose task hash is
// gone or not finished, or whose idempotency record is gone, names another
// task or is still processing: a finished record the failover lost.
func lostFinished(ctx context.Context, eng *broker.Broker, ref broker.QueueRef, acked map[string]string,
	done func(taskID string) bool) (finished int, lost []string, err error) {
	for key, id := range acked {
		if !done(id) {
			continue
		}
		finished++
		ti, err := eng.GetTask(ctx, ref, id)
		if err != nil && !errors.Is(err, broker.ErrTaskNotFound) {
			return 0, nil, err
		}
		rec, rerr := eng.Idempotency(ctx, ref, key)
		if rerr != nil && !errors.Is(rerr, broker.ErrTaskNotFound) {
			return 0, nil, rerr
		}
		if err != nil || !ti.State.Terminal() || rerr != nil || rec.TaskID != id || rec.State == broker.IdempotencyProcessing {
			lost = append(lost, key)
		}
	}
	slices.Sort(lost)
	return finished, lost, nil
}

// submit submits key until Redis acknowledges it (a retry with the key is a
// replay or an in-progress answer) or stop closes; it reports whether it was
// acknowledged.
func submit(ctx context.Context, eng *broker.Broker, ref broker.QueueRef, key string, l *ledger, stop <-chan struct{}) bool {
	for {
		r, err := eng.Submit(ctx, ref, broker.SubmitRequest{Type: "job", IdempotencyKey: key, Priority: 5})
		var be *broker.Error
		switch {
		case err == nil:
			l.ack(key, r.Task.ID)
			return true
		case errors.As(err, &be) && be.Code == broker.CodeIdempotencyInProgress:
			l.ack(key, be.TaskID)
			return true
		}
		select {
		case <-stop:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startWorkers runs two worker servers whose handler records every run.
func startWorkers(t testing.TB, url string, l *ledger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 2 {
		mux := worker.NewMux()
		mux.HandleFunc("job", func(_ context.Context, task *worker.Task) (any, error) {
			l.ran(task.IdempotencyKey)
			return nil, nil
		})
		w, err := worker.NewServer(worker.Config{
			RedisConn: redisconn.Config{URL: url}, Namespace: ns, Queue: q, Concurrency: 16,
			VisibilityTimeout: visibility, HeartbeatInterval: time.Second, DrainTimeout: 2 * time.Second,
			WorkerID: "w" + strconv.Itoa(i), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		}, mux)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = w.Run(ctx) })
	}
	return func() { cancel(); wg.Wait() }
}

// drain waits until the queue holds nothing and no handler has run for
// longer than the visibility timeout (so entries left pending by the
// failover have been reclaimed and run), for at most 2 minutes. A queue
// whose keys are gone (a failover lost them all) holds nothing.
func drain(t testing.TB, eng *broker.Broker, ref broker.QueueRef, l *ledger) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	last, lastChange := -1, time.Now()
	var st broker.QueueStats
	var err error
	for time.Now().Before(deadline) {
		n := l.executions()
		if n != last {
			last, lastChange = n, time.Now()
		}
		st, err = eng.Stats(t.Context(), ref)
		empty := redis.HasErrorPrefix(err, "NOGROUP") || (err == nil && st.Depth == 0 && st.Scheduled == 0)
		if empty && time.Since(lastChange) > visibility+time.Second {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the queue did not drain within 2 minutes: %+v %v", st, err)
}

// One failover with async replication, and two with replicaAcks 1. Loss
// with async replication is allowed (it is what the benchmark measures), but
// an acknowledged task that survived on the promoted master must run; with
// replicaAcks 1 no acknowledged task may be missing or lost and no finished
// record whose completion was acknowledged may be lost.
func TestFailover(t *testing.T) {
	for _, v := range []variant{variants[0], variants[4]} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			o := runFailover(t, v)
			t.Logf("%s", o)
			if len(o.lost) > o.missing {
				t.Errorf("%d acknowledged tasks never ran, but only %d are missing from the promoted master: %v",
					len(o.lost), o.missing, head(o.lost))
			}
			if o.finished == 0 {
				t.Errorf("no completion was seen acknowledged: the finished records were not checked")
			}
			if v.replicaAcks > 0 && (o.missing > 0 || len(o.lost) > 0 || len(o.lostFinished) > 0) {
				t.Errorf("with replicaAcks %d, %d acknowledged tasks are missing, %d never ran, %d finished records are lost: %v %v",
					v.replicaAcks, o.missing, len(o.lost), len(o.lostFinished), head(o.lost), head(o.lostFinished))
			}
		})
	}
}

func (o outcome) String() string {
	gaps := make([]string, len(o.unavailable))
	for i, d := range o.unavailable {
		gaps[i] = d.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("acknowledged %d (gave up %d), executions %d, missing after failover %d, lost %d, duplicated %d, "+
		"finished %d, finished records lost %d, no acknowledged submission for %s, failovers %d",
		o.acked, o.gaveUp, o.executions, o.missing, len(o.lost), len(o.duplicated), o.finished, len(o.lostFinished),
		strings.Join(gaps, " + "), o.failovers)
}

func head(s []string) []string { return s[:min(len(s), 10)] }

// BenchmarkFailover runs every variant (a sub-benchmark each, so -bench
// 'Failover/replicaAcks' picks some) DTQ_BENCH_RUNS times (default 3) and
// prints one row per variant with the totals.
func BenchmarkFailover(b *testing.B) {
	logging.Disable() // go-redis logs every refused dial during a failover
	runs := 3
	if v, err := strconv.Atoi(os.Getenv("DTQ_BENCH_RUNS")); err == nil && v > 0 {
		runs = v
	}
	fmt.Printf("\n%d runs per variant; %d producers at about 4,000 submissions/s; 1 master, 1 replica, 3 sentinels (down-after 1 s)\n\n", runs, producers)
	fmt.Println("| variant | acknowledged | missing after failover | lost (never ran) | duplicated (ran twice) | " +
		"finished (completion acknowledged) | finished records lost | no acknowledged submission for | failovers |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---|---:|")
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			var acked, missing, lost, dup, finished, lostFinished, failovers int
			var gaps []string
			for range runs {
				o := runFailover(b, v)
				acked, missing, lost, dup = acked+o.acked, missing+o.missing, lost+len(o.lost), dup+len(o.duplicated)
				finished, lostFinished, failovers = finished+o.finished, lostFinished+len(o.lostFinished), failovers+o.failovers
				for _, d := range o.unavailable {
					gaps = append(gaps, d.Round(100*time.Millisecond).String())
				}
				fmt.Fprintf(os.Stderr, "%s: %s\n", v.name, o)
			}
			fmt.Printf("| %s | %d | %d | %d | %d | %d | %d | %s | %d |\n", v.name, acked, missing, lost, dup, finished, lostFinished,
				strings.Join(gaps, ", "), failovers)
		})
	}
}
