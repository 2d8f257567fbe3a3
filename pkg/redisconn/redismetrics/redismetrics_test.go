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

package redismetrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redisconn/redismetrics"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
)

// Each command and pipeline is timed once (blocking reads and the client's
// connection setup not), and only real failures count as errors, by command
// and kind.
func TestInstrument(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer rdb.Close()
	reg := prometheus.NewRegistry()
	if err := redismetrics.Instrument(rdb, reg); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	rdb.Set(ctx, "s", "v", 0)
	rdb.Get(ctx, "missing")      // nil reply: not an error
	rdb.LPush(ctx, "s", "x")     // WRONGTYPE
	rdb.Do(ctx, "NOSUCHCOMMAND") // ERR unknown command
	rdb.XGroupCreateMkStream(ctx, "st", "g", "0")
	rdb.XGroupCreateMkStream(ctx, "st", "g", "0") // BUSYGROUP: expected
	if err := redis.NewScript(`return 1`).Run(ctx, rdb, nil).Err(); err != nil {
		t.Fatal(err) // EVALSHA gets NOSCRIPT (expected), then EVAL
	}
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error { // the WRONGTYPE is the point
		p.Get(ctx, "s")
		p.LPush(ctx, "s", "y") // WRONGTYPE inside a pipeline
		return nil
	})
	rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{"st", "$"}, Block: 10 * time.Millisecond}) // blocking: not timed
	gone, cancel := context.WithCancel(ctx)
	cancel()
	rdb.Get(gone, "s") // cancelled by the caller: not an error

	// A server that is not there: network.
	addr, err := loopback.FreeAddr() // a port nothing listens on
	if err != nil {
		t.Fatal(err)
	}
	down := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer down.Close()
	downReg := prometheus.NewRegistry()
	if err := redismetrics.Instrument(down, downReg); err != nil {
		t.Fatal(err)
	}
	down.Get(ctx, "k")

	// A reply slower than the read timeout (a script that keeps the server
	// busy for 300 ms): timeout.
	slow := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 50 * time.Millisecond, MaxRetries: -1})
	defer slow.Close()
	slowReg := prometheus.NewRegistry()
	if err := redismetrics.Instrument(slow, slowReg); err != nil {
		t.Fatal(err)
	}
	slow.Eval(ctx, `local t = redis.call("TIME")
local stop = t[1] * 1000000 + t[2] + 300000
repeat t = redis.call("TIME") until t[1] * 1000000 + t[2] >= stop
return 1`, nil)

	errs, counts := series(t, reg)
	wantErrs := map[string]float64{
		"lpush/WRONGTYPE":   2,
		"nosuchcommand/ERR": 1,
	}
	if diff := cmp.Diff(wantErrs, errs); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	wantCounts := map[string]uint64{
		"set": 1, "get": 2, "lpush": 1, "nosuchcommand": 1, "xgroup": 2, "evalsha": 1, "eval": 1,
		"pipeline": 1,
	}
	if diff := cmp.Diff(wantCounts, counts); diff != "" {
		t.Errorf("observations (-want +got):\n%s", diff)
	}
	if errs, _ := series(t, downReg); !cmp.Equal(errs, map[string]float64{"get/network": 1}) {
		t.Errorf("a server that is down: errors %v, want get/network 1", errs)
	}
	if errs, _ := series(t, slowReg); !cmp.Equal(errs, map[string]float64{"eval/timeout": 1}) {
		t.Errorf("a slow reply: errors %v, want eval/timeout 1", errs)
	}
}

// series returns the error counters by "command/kind" and the number of
// latency observations by command.
func series(t *testing.T, reg *prometheus.Registry) (map[string]float64, map[string]uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	errs, counts := map[string]float64{}, map[string]uint64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetName() {
			case "dtq_redis_command_errors_total":
				errs[l["command"]+"/"+l["kind"]] = m.GetCounter().GetValue()
			case "dtq_redis_command_duration_seconds":
				counts[l["command"]] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	return errs, counts
}
