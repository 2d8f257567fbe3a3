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

// Package redismetrics measures a go-redis client's commands on Prometheus
// (docs/metrics.md), for the manager and the API server.
package redismetrics

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Instrument adds a hook to rdb that measures every command and pipeline it
// sends, and registers the two series on reg (docs/metrics.md):
//
//   - dtq_redis_command_duration_seconds{command}: round-trip latency; a
//     pipeline (including the engine's auto-pipelined batches) is one
//     observation labelled "pipeline"; blocking reads (XREAD ... BLOCK) are
//     not observed, since their time is mostly waiting, nor are the commands
//     the client sends to set up a connection (HELLO, AUTH, SELECT, CLIENT:
//     Redis before 7.2 answers CLIENT SETINFO with an error the client
//     ignores; a failed setup fails the command that needed the connection).
//   - dtq_redis_command_errors_total{command,kind}: failed commands, each
//     command of a pipeline on its own. kind is "timeout", "network", or the
//     error code of a Redis error reply (OOM, READONLY, NOPERM, LOADING, ERR...).
//     Answers the code expects are not errors: a nil reply, NOSCRIPT (the
//     client then loads the script) and BUSYGROUP (the consumer group exists);
//     nor is a cancelled context or a closed client.
func Instrument(rdb redis.UniversalClient, reg prometheus.Registerer) error {
	h := &metricsHook{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dtq_redis_command_duration_seconds",
			Help:    "Round-trip time of Redis commands and pipelines (command=\"pipeline\"); blocking reads excluded.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9), // 100us .. 6.5s
		}, []string{"command"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dtq_redis_command_errors_total",
			Help: "Redis commands that failed, by command and kind (timeout, network, or the Redis error code).",
		}, []string{"command", "kind"}),
	}
	for _, c := range []prometheus.Collector{h.duration, h.errors} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	rdb.AddHook(h)
	return nil
}

type metricsHook struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

func (h *metricsHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *metricsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if connSetup[cmd.Name()] {
			return next(ctx, cmd)
		}
		start := time.Now()
		err := next(ctx, cmd)
		if !blocking(cmd) {
			h.duration.WithLabelValues(cmd.Name()).Observe(time.Since(start).Seconds())
		}
		h.count(cmd.Name(), err)
		return err
	}
}

func (h *metricsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && connSetup[cmds[0].Name()] {
			return next(ctx, cmds)
		}
		start := time.Now()
		err := next(ctx, cmds)
		h.duration.WithLabelValues("pipeline").Observe(time.Since(start).Seconds())
		for _, c := range cmds {
			h.count(c.Name(), c.Err())
		}
		return err
	}
}

func (h *metricsHook) count(command string, err error) {
	if kind := errorKind(err); kind != "" {
		h.errors.WithLabelValues(command, kind).Inc()
	}
}

// connSetup holds the commands the client sends when it opens a connection
// (the engine never sends them).
var connSetup = map[string]bool{"hello": true, "auth": true, "select": true, "client": true, "readonly": true}

// errorKind classifies a command's error for dtq_redis_command_errors_total;
// "" for no error or an expected answer.
func errorKind(err error) string {
	switch {
	case err == nil, errors.Is(err, redis.Nil), errors.Is(err, context.Canceled), errors.Is(err, redis.ErrClosed):
		return ""
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout):
		return "timeout"
	}
	var re redis.Error
	if errors.As(err, &re) {
		code, _, _ := strings.Cut(re.Error(), " ")
		switch {
		case code == "NOSCRIPT", code == "BUSYGROUP":
			return ""
		case len(code) == 0 || len(code) > 16 || strings.ToUpper(code) != code:
			return "ERR" // not an error code: keep the label's values few
		}
		return code
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "network"
}

// blocking reports whether cmd is a read that waits in Redis (XREAD or
// XREADGROUP with BLOCK).
func blocking(cmd redis.Cmder) bool {
	if n := cmd.Name(); n != "xread" && n != "xreadgroup" {
		return false
	}
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && strings.EqualFold(s, "block") {
			return true
		}
	}
	return false
}
