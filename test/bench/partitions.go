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
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
	"github.com/dtq-dev/dtq/pkg/redistest/rediscluster"
	"github.com/dtq-dev/dtq/pkg/worker"
)

// partitionsExperiment (-partitions M) measures what spreading one queue
// over M partitions buys on a cluster of M masters on this machine: one
// queue at 1 partition against the same queue at M, keyed submission and a
// drain, each partition a queue of its own (broker.QueueRef.Partition; a
// keyed task goes to broker.PartitionOf of its key, keyless tasks round
// robin), each drained by its own worker server of drainSlots slots; keyed
// submission runs twice, with the same producers and with as many per
// partition as the queue at 1 has (a queue's calls carry the submissions
// that wait together, so fewer per partition means smaller calls). It
// prints, per run, the rate and the Redis CPU per task on every master; the
// capacity ratio is the busiest master's CPU per task at 1 partition over
// the busiest's at M (how much more one queue can take before a master is
// full), beside the summed CPU per task (what partitioning costs in all).
func partitionsExperiment(masters, tasks, producers int, payload []byte, hook string) error {
	ctx := context.Background()
	addrs, stop, err := startCluster(masters)
	if err != nil {
		return err
	}
	defer stop()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 4 * drainSlots})
	defer cc.Close()
	nodes := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		nodes[i] = redis.NewClient(&redis.Options{Addr: a})
		defer nodes[i].Close()
	}
	// sample reads every master's CPU seconds and the script calls they ran.
	type sample struct {
		cpu   []float64
		sys   float64          // system CPU seconds, summed over the masters
		calls map[string]int64 // command -> calls, summed over the masters
		usec  int64            // EVALSHA's time, summed over the masters
		evals []int64          // EVALSHA calls per master
	}
	read := func() sample {
		s := sample{cpu: make([]float64, len(nodes)), calls: map[string]int64{}, evals: make([]int64, len(nodes))}
		for i, n := range nodes {
			u, sys := redisCPUSplit(ctx, n)
			s.cpu[i], s.sys = u+sys, s.sys+sys
			for c, k := range commandStats(ctx, n) {
				s.calls[c] += k[0]
				if c == "evalsha" {
					s.usec += k[1]
					s.evals[i] = k[0]
				}
			}
		}
		return s
	}
	base := broker.QueueRef{Namespace: "bench", Name: "parts"}
	b := broker.New(cc)
	fmt.Printf("cluster of %d masters, redis %s, %d tasks per run, %d producers\n\n", masters, redisVersion(nodes[0].Info(ctx, "server").Val()), tasks, producers)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "case\tpartitions\ttasks/s\ttasks per script call\tredis us/task, summed\tbusiest master us/task\tper master us/task\t\n")
	busiest := map[string]float64{}
	summed := map[string]float64{}
	keyed := func(scale bool) func(qs []broker.QueueRef, mark func()) (time.Duration, error) {
		return func(qs []broker.QueueRef, mark func()) (time.Duration, error) {
			n := producers
			if scale {
				n *= len(qs)
			}
			mark()
			return parallel(tasks, n, func(i int) error {
				key := fmt.Sprintf("key-%d", i)
				_, err := b.Submit(ctx, qs[broker.PartitionOf(key, len(qs))], broker.SubmitRequest{
					Type: "bench", Payload: payload, Priority: 5, IdempotencyKey: key})
				return err
			})
		}
	}
	for _, run := range []struct {
		name string
		fn   func(qs []broker.QueueRef, mark func()) (time.Duration, error)
	}{
		{"keyed submit", keyed(false)},
		{"keyed submit, producers x partitions", keyed(true)},
		{"drain", func(qs []broker.QueueRef, mark func()) (time.Duration, error) {
			return partitionsDrain(ctx, cc, b, qs, tasks, producers, payload, mark)
		}},
	} {
		for _, n := range []int{1, masters} {
			if err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.FlushAll(ctx).Err() }); err != nil {
				return err
			}
			qs := make([]broker.QueueRef, n)
			for p := range qs {
				qs[p] = base.Partition(p, n)
				cfg := broker.DefaultQueueConfig()
				cfg.MaxDepth = int64(tasks) * 2
				if err := b.EnsureQueue(ctx, qs[p], cfg); err != nil {
					return err
				}
			}
			phase := func(p string) error {
				if hook == "" {
					return nil
				}
				cmd := exec.Command("sh", "-c", hook)
				cmd.Env = append(os.Environ(), "PHASE="+p, "RUN="+run.name, "PARTITIONS="+strconv.Itoa(n))
				cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
				return cmd.Run()
			}
			var s0 sample
			var hookErr error
			d, err := run.fn(qs, func() { s0, hookErr = read(), phase("start") })
			if err = errors.Join(err, hookErr, phase("end")); err != nil {
				return fmt.Errorf("%s, %d partitions: %w", run.name, n, err)
			}
			s1 := read()
			var per []string
			var sum, top float64
			for i := range s1.cpu {
				us := (s1.cpu[i] - s0.cpu[i]) * 1e6 / float64(tasks)
				per = append(per, fmt.Sprintf("%.1f", us))
				sum += us
				top = max(top, us)
			}
			if n == 1 {
				busiest[run.name], summed[run.name] = top, sum
			}
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%s\t\n", run.name, n, float64(tasks)/d.Seconds(),
				float64(tasks)/float64(s1.calls["evalsha"]-s0.calls["evalsha"]), sum, top, strings.Join(per, " "))
			if *verbose {
				var cs []string
				for c, k := range s1.calls {
					if d := k - s0.calls[c]; d > 0 {
						cs = append(cs, fmt.Sprintf("%s %.2f", c, float64(d)/float64(tasks)))
					}
				}
				sort.Strings(cs)
				evals := make([]string, len(nodes))
				for i := range evals {
					evals[i] = strconv.FormatInt(s1.evals[i]-s0.evals[i], 10)
				}
				fmt.Fprintf(os.Stderr, "%s, %d partitions: system CPU %.1f us/task, wall time in EVALSHA %.1f us/task, script calls per master %s; commands per task: %s\n", run.name, n,
					(s1.sys-s0.sys)*1e6/float64(tasks), float64(s1.usec-s0.usec)/float64(tasks), strings.Join(evals, " "), strings.Join(cs, ", "))
			}
			if n == masters {
				fmt.Fprintf(tw, "%s\t%d vs 1\t\t\tx%.2f\tcapacity x%.2f\t\t\n", run.name, n, sum/summed[run.name], busiest[run.name]/top)
			}
		}
	}
	return tw.Flush()
}

// partitionsDrain submits tasks keyless, round robin over qs, then times
// one worker server per partition until every task ran and none is in
// flight. It calls mark when the submission is done, so that the caller's
// figures are the drain's alone.
func partitionsDrain(ctx context.Context, cc *redis.ClusterClient, b *broker.Broker, qs []broker.QueueRef, tasks, producers int, payload []byte, mark func()) (time.Duration, error) {
	if _, err := parallel(tasks, producers, func(i int) error {
		_, err := b.Submit(ctx, qs[i%len(qs)], broker.SubmitRequest{Type: "noop", Payload: payload, Priority: 5})
		return err
	}); err != nil {
		return 0, err
	}
	mark()
	var ran atomic.Int64
	fin := make(chan struct{})
	mux := worker.NewMux()
	mux.HandleFunc("noop", func(context.Context, *worker.Task) (any, error) {
		if ran.Add(1) == int64(tasks) {
			close(fin)
		}
		return nil, nil
	})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, len(qs))
	begin := time.Now()
	for _, q := range qs {
		srv, err := worker.NewServer(worker.Config{Redis: cc, Namespace: q.Namespace, Queue: q.Name,
			Concurrency: drainSlots, Logger: quietLog()}, mux)
		if err != nil {
			cancel()
			return 0, err
		}
		go func() { _ = srv.Run(rctx); done <- struct{}{} }()
	}
	defer func() {
		cancel()
		for range qs {
			<-done
		}
	}()
	select {
	case <-fin:
	case <-time.After(5 * time.Minute):
		return 0, fmt.Errorf("drain: %d of %d after 5m", ran.Load(), tasks)
	}
	for _, q := range qs {
		for {
			st, err := b.Stats(ctx, q)
			if err != nil {
				return 0, err
			}
			if st.Depth == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	return time.Since(begin), nil
}

// startCluster starts masters redis-server processes in cluster mode on
// loopback and joins them (rediscluster.Form: equal runs of slots in
// order); stop kills them.
func startCluster(masters int) (addrs []string, stop func(), err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, nil, fmt.Errorf("redis-server not found: run `make redis` (installs it with apt) or install Redis 7")
	}
	dir, err := os.MkdirTemp("", "dtq-bench-cluster-")
	if err != nil {
		return nil, nil, err
	}
	var cmds []*exec.Cmd
	stop = func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		_ = os.RemoveAll(dir)
	}
	for i := range masters {
		port, err := loopback.FreePort()
		if err != nil {
			stop()
			return nil, nil, err
		}
		cmd := exec.Command(bin, append([]string{"--port", fmt.Sprint(port), "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", i)), "--dir", dir}, serverArgs...)...)
		if err := cmd.Start(); err != nil {
			stop()
			return nil, nil, err
		}
		cmds = append(cmds, cmd)
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	ctx := context.Background()
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		deadline := time.Now().Add(5 * time.Second)
		for c.Ping(ctx).Err() != nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		_ = c.Close()
	}
	if err := rediscluster.Form(ctx, addrs, nil); err != nil {
		stop()
		return nil, nil, err
	}
	return addrs, stop, nil
}

// commandStats returns the calls and microseconds of each command in INFO
// commandstats.
func commandStats(ctx context.Context, rdb *redis.Client) map[string][2]int64 {
	info, _ := rdb.Info(ctx, "commandstats").Result()
	out := map[string][2]int64{}
	for _, l := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), ":")
		if name, found := strings.CutPrefix(name, "cmdstat_"); ok && found {
			calls, rest, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			usec, _, _ := strings.Cut(strings.TrimPrefix(rest, "usec="), ",")
			c, _ := strconv.ParseInt(calls, 10, 64)
			u, _ := strconv.ParseInt(usec, 10, 64)
			out[name] = [2]int64{c, u}
		}
	}
	return out
}
