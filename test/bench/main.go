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

// Command bench compares dtq's engine with a peer queue (asynq) on one fresh
// redis-server, same task count, payload and producers, and prints a table.
// The API group compares dtq's HTTP API (the real bin/api process, auth on)
// with the engine's own Submit instead.
//
//	go run ./test/bench                  (from the repository root: cd test/bench && go run .)
//	go run . -tasks 100000 -producers 16 -run Submission
//
// Cases register themselves with register (see submission.go), so other files
// can add groups (e.g. a worker drain benchmark) without touching this one.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
)

// Params are shared by every case of a run.
// benchPayload is every task's payload.
var benchPayload = []byte(`{"order_id":"0000000000","amount":1234,"currency":"EUR","note":"benchmark payload"}`)

type Params struct {
	Addr      string // redis-server host:port, flushed before each case
	Tasks     int
	Producers int
	Payload   []byte
}

// Case measures one operation for dtq and for the peer.
type Case struct {
	Group string // section of docs/benchmarks.md, e.g. "Submission"
	Name  string
	// PeerName names the peer in the table ("asynq" when empty).
	PeerName string
	// Run returns how many operations took how long, for dtq and for the peer.
	Dtq, Peer func(ctx context.Context, p Params) (ops int, d time.Duration, err error)
}

var cases []Case

var verbose *bool

func register(c Case) { cases = append(cases, c) }

func main() {
	tasks := flag.Int("tasks", 50000, "tasks per case")
	producers := flag.Int("producers", 16, "concurrent producers")
	run := flag.String("run", "", "regexp selecting groups or case names")
	addr := flag.String("addr", "", "use this redis-server (it is flushed!) instead of starting one")
	verbose = flag.Bool("v", false, "print Redis CPU time and script calls per run")
	only := flag.String("only", "", `run only one side: "dtq" or "peer" (with -cpuprofile, to profile one side)`)
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (client side) to this file")
	partitions := flag.Int("partitions", 0, "instead of the table: one queue at 1 partition against the same queue at this many, on a cluster of as many masters (docs/benchmarks.md)")
	hook := flag.String("hook", "", "with -partitions: a shell command run as each run's measured part starts and ends (PHASE=start|end, RUN, PARTITIONS in its environment), e.g. to zero and dump callgrind's counts")
	flag.Parse()
	if *partitions > 0 {
		if err := partitionsExperiment(*partitions, *tasks, *producers, benchPayload, *hook); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		cleanups = append(cleanups, pprof.StopCPUProfile)
	}
	sel := regexp.MustCompile(*run)

	if *addr == "" {
		srv, err := startRedis()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		cleanups = append(cleanups, srv.stop)
		*addr = srv.addr
	}
	p := Params{Addr: *addr, Tasks: *tasks, Producers: *producers,
		Payload: benchPayload}
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	defer rdb.Close()
	ctx := context.Background()
	ver, _ := rdb.Info(ctx, "server").Result()
	node := rdb.ConfigGet(ctx, "stream-node-max-entries").Val()["stream-node-max-entries"]

	fmt.Printf("tasks=%d producers=%d payload=%dB redis=%s stream-node-max-entries=%s\n\n",
		p.Tasks, p.Producers, len(p.Payload), redisVersion(ver), node)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "group\tcase\tdtq ops/s\tpeer ops/s\tdtq/peer\tpeer\t")
	for _, c := range cases {
		if !sel.MatchString(c.Group + "/" + c.Name) {
			continue
		}
		rate := func(f func(context.Context, Params) (int, time.Duration, error)) float64 {
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				exit(1)
			}
			user0, sys0 := redisCPUSplit(ctx, rdb)
			own0 := ownCPU()
			_ = rdb.ConfigResetStat(ctx).Err()
			n, d, err := f(ctx, p)
			if *verbose {
				user, sys := redisCPUSplit(ctx, rdb)
				user, sys = user-user0, sys-sys0
				rc, oc := user+sys, ownCPU()-own0
				fmt.Fprintf(os.Stderr, "%s/%s: %d ops in %s, redis cpu %.2fs (%.1f us/op: user %.1f, sys %.1f), bench process cpu %.2fs (%.1f us/op); %s\n",
					c.Group, c.Name, n, d.Round(time.Millisecond), rc, rc*1e6/float64(n), user*1e6/float64(n), sys*1e6/float64(n), oc, oc*1e6/float64(n), scriptCalls(ctx, rdb))
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s/%s: %v\n", c.Group, c.Name, err)
				exit(1)
			}
			return float64(n) / d.Seconds()
		}
		var ours, peer float64
		if *only != "peer" {
			ours = rate(c.Dtq)
		}
		if *only != "dtq" {
			peer = rate(c.Peer)
		}
		name := c.PeerName
		if name == "" {
			name = "asynq"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.2f\t%s\t\n", c.Group, c.Name, ours, peer, ours/peer, name)
	}
	_ = tw.Flush()
	exit(0)
}

// cleanups stop what the run started (Redis; the API group's control plane
// and API process), last first, when the table is printed or a case fails.
var cleanups []func()

func exit(code int) {
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	os.Exit(code)
}

// redisCPU returns the server's used CPU seconds (user+sys).
func redisCPU(ctx context.Context, rdb *redis.Client) float64 {
	u, s := redisCPUSplit(ctx, rdb)
	return u + s
}

// redisCPUSplit returns the server's used CPU seconds in user space (the
// scripts and commands) and in the kernel (mostly the network).
func redisCPUSplit(ctx context.Context, rdb *redis.Client) (user, sys float64) {
	info, _ := rdb.Info(ctx, "cpu").Result()
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_cpu_user:"); ok {
			user, _ = strconv.ParseFloat(v, 64)
		} else if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_cpu_sys:"); ok {
			sys, _ = strconv.ParseFloat(v, 64)
		}
	}
	return user, sys
}

// ownCPU returns this process's used CPU seconds (user+sys): the client side,
// and the workers in the Workers group.
func ownCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// scriptCalls summarises the evalsha/eval lines of INFO commandstats.
func scriptCalls(ctx context.Context, rdb *redis.Client) string {
	info, _ := rdb.Info(ctx, "commandstats").Result()
	var out []string
	for _, l := range strings.Split(info, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "cmdstat_evalsha:") || strings.HasPrefix(l, "cmdstat_eval:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, " ")
}

// redisCommands sums the calls of INFO commandstats (the commands scripts
// run and the EVALSHA that ran them alike), leaving out what clients send
// when they connect and what the bench sends to measure.
func redisCommands(ctx context.Context, rdb *redis.Client) int64 {
	info, _ := rdb.Info(ctx, "commandstats").Result()
	var n int64
	for _, l := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		switch name {
		case "hello", "client|setinfo", "ping", "info", "config|resetstat", "flushall":
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		c, _ := strconv.ParseInt(calls, 10, 64)
		n += c
	}
	return n
}

func redisVersion(info string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}

// parallel runs fn(i) for i in [0, n) on producers goroutines and times it.
func parallel(n, producers int, fn func(i int) error) (time.Duration, error) {
	errs := make(chan error, producers)
	next := make(chan int, producers*4)
	start := time.Now()
	for range producers {
		go func() {
			var first error
			for i := range next {
				if err := fn(i); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	var err error
	for range producers {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	return time.Since(start), err
}
