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

package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
)

// Broker runs the engine's operations against one Redis (single node or cluster).
type Broker struct {
	rdb redis.UniversalClient
	// fast runs the hot-path batch scripts (Submit, Start, Complete; see
	// batch.go). When the client supports it, this is a sharedScripter, so
	// concurrent batches of different queues and operations share round trips;
	// blocking reads never go through it.
	fast  redis.Scripter
	clock Clock
	// rateClock, when set (tests only), replaces the Redis server's TIME as
	// the clock of flow control's rate limits, so a test steps it as it
	// steps clock.
	rateClock Clock
	// tracerProvider gives the dtq.submit spans; nil for the global one.
	tracerProvider trace.TracerProvider
	// minLayout and maxLayout are the Redis layouts this Broker reads
	// (layoutversion.go).
	minLayout, maxLayout int
	// queues holds each queue's batchers (QueueRef -> *queueBatchers): concurrent
	// Submit, Start and Complete calls on one queue share one script call.
	queues sync.Map
}

// Clock tells the engine the time. k8s.io/utils/clock's clocks satisfy it.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Option configures a Broker.
type Option func(*Broker)

// WithClock injects the clock used for timestamps, due times and expiry.
func WithClock(c Clock) Option { return func(b *Broker) { b.clock = c } }

// WithTracerProvider sets the provider of the submissions' dtq.submit spans
// (package tracing); by default the OpenTelemetry global one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(b *Broker) { b.tracerProvider = tp }
}

// New returns a Broker on rdb.
func New(rdb redis.UniversalClient, opts ...Option) *Broker {
	b := &Broker{rdb: rdb, fast: rdb, clock: realClock{}, minLayout: MinLayout, maxLayout: MaxLayout}
	if c, ok := rdb.(interface {
		AutoPipeline() (*redis.AutoPipeliner, error)
	}); ok {
		if p, err := c.AutoPipeline(); err == nil {
			b.fast = &sharedScripter{Scripter: rdb, pipe: p}
		}
	}
	for _, o := range opts {
		o(b)
	}
	return b
}

// now returns the clock's time as Unix milliseconds (for scripts) and as the
// RFC 3339 text of idempotency records.
func (b *Broker) now() (int64, string) {
	t := b.clock.Now().UTC().Truncate(time.Millisecond)
	return t.UnixMilli(), t.Format(time.RFC3339Nano)
}

// Config hash fields, written by EnsureQueue and read by the scripts.
const (
	cfgMaxDepth    = "max_depth"
	cfgMaxPayload  = "max_payload"
	cfgMaxAttempts = "max_attempts"
	cfgTimeout     = "timeout_ms"
	cfgRetryBase   = "retry_base_ms"
	cfgRetryMax    = "retry_max_ms"
	cfgRetryJitter = "retry_jitter"
	cfgIdemTTL     = "idem_ttl_ms"
	cfgTaskTTL     = "task_ttl_ms"
	cfgResultTTL   = "result_ttl_ms"
	cfgResultMax   = "result_max"
	cfgDLQ         = "dlq"
	cfgDLQMaxLen   = "dlq_maxlen"
	cfgVisibility  = "visibility_ms"
	cfgFlow        = "flow"          // flow control (flowText); written by flowConfigScript
	cfgOnMismatch  = "idem_mismatch" // OnMismatch; absent (a release before it) replays
	// Read by the engine (replicas.go), not by the scripts.
	cfgReplicaAcks       = "replica_acks"
	cfgReplicaAckTimeout = "replica_ack_timeout_ms"
)

func validQueue(q QueueRef) error {
	for _, s := range []string{q.Namespace, q.Name} {
		if s == "" || len(s) > 253 {
			return &Error{Code: CodeInvalidTask, Message: fmt.Sprintf("invalid queue %q", q.String())}
		}
		for _, c := range []byte(s) {
			if c == '{' || c == '}' || c == '/' || c <= ' ' {
				return &Error{Code: CodeInvalidTask, Message: fmt.Sprintf("invalid queue %q", q.String())}
			}
		}
	}
	return nil
}

func validConfig(c QueueConfig) error {
	switch {
	case c.MaxDepth < 1, c.MaxPayloadBytes < 2, c.DefaultMaxAttempts < 1, c.DefaultMaxAttempts > MaxAttemptsCap,
		c.DefaultTimeout < time.Millisecond, c.Retry.BaseDelay < 0, c.Retry.MaxDelay < c.Retry.BaseDelay,
		c.Retry.Jitter < 0, c.Retry.Jitter > 1, c.IdempotencyTTL < time.Millisecond, c.TaskRetention < time.Millisecond,
		c.ResultRetention < time.Millisecond, c.ResultMaxBytes < 1, c.DeadLetterMaxLen < 1, c.VisibilityTimeout < time.Millisecond,
		c.ReplicaAcks < 0, c.ReplicaAcks > 0 && c.ReplicaAckTimeout < time.Millisecond,
		c.OnMismatch != "" && c.OnMismatch != MismatchReplay && c.OnMismatch != MismatchReject:
		return fmt.Errorf("broker: invalid queue config %+v", c)
	}
	return validFlow(c.Flow)
}

// EnsureQueue writes the queue's config, registers the queue in its
// namespace's set (see Queues) and creates the consumer group "workers" on its
// ten streams (MKSTREAM), in one pipeline, then writes its flow control
// (cfg.Flow, nil for none; see writeFlow): the next claim uses it. A new
// queue's layout record (layoutversion.go) is the oldest layout this build
// writes, so workers of every release it runs beside may serve it; an
// existing record is kept. When only the registration failed, it returns
// ErrNotListed once everything else is written.
// Idempotent; call it again to change the config.
func (b *Broker) EnsureQueue(ctx context.Context, q QueueRef, cfg QueueConfig) error {
	if err := validQueue(q); err != nil {
		return err
	}
	if err := validConfig(cfg); err != nil {
		return err
	}
	k := keysFor(q)
	dlq := "0"
	if cfg.DeadLetter {
		dlq = "1"
	}
	onMismatch := cmp.Or(cfg.OnMismatch, MismatchReplay)
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	var hset, sadd *redis.IntCmd
	var layout *redis.BoolCmd
	groups := make([]*redis.StatusCmd, Bands)
	_, _ = b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		hset = p.HSet(ctx, k.config(),
			cfgMaxDepth, cfg.MaxDepth, cfgMaxPayload, cfg.MaxPayloadBytes, cfgMaxAttempts, cfg.DefaultMaxAttempts,
			cfgTimeout, ms(cfg.DefaultTimeout), cfgRetryBase, ms(cfg.Retry.BaseDelay), cfgRetryMax, ms(cfg.Retry.MaxDelay),
			cfgRetryJitter, strconv.FormatFloat(cfg.Retry.Jitter, 'f', -1, 64), cfgIdemTTL, ms(cfg.IdempotencyTTL),
			cfgTaskTTL, ms(cfg.TaskRetention), cfgResultTTL, ms(cfg.ResultRetention), cfgResultMax, cfg.ResultMaxBytes,
			cfgDLQ, dlq, cfgDLQMaxLen, cfg.DeadLetterMaxLen, cfgVisibility, ms(cfg.VisibilityTimeout),
			cfgReplicaAcks, cfg.ReplicaAcks, cfgReplicaAckTimeout, ms(cfg.ReplicaAckTimeout), cfgOnMismatch, string(onMismatch))
		layout = p.HSetNX(ctx, k.config(), fieldLayout, b.minLayout)
		sadd = p.SAdd(ctx, namespaceQueues(q.Namespace), q.Name)
		for i, s := range k.streams() {
			groups[i] = p.XGroupCreateMkStream(ctx, s, group, "0")
		}
		return nil
	}) // each command carries its own error
	if err := hset.Err(); err != nil {
		return fmt.Errorf("broker: write config of %s: %w", q, err)
	}
	if err := layout.Err(); err != nil {
		return fmt.Errorf("broker: write layout of %s: %w", q, err)
	}
	for i, g := range groups {
		if err := g.Err(); err != nil && !isBusyGroup(err) {
			return fmt.Errorf("broker: create group on %s: %w", k.stream(i), err)
		}
	}
	if cfg.Flow != nil {
		if err := b.raiseForFlow(ctx, q); err != nil {
			return err
		}
	}
	if err := b.writeFlow(ctx, q, cfg.Flow); err != nil {
		return err
	}
	if err := sadd.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotListed, q, err)
	}
	return nil
}

// ErrNotListed is EnsureQueue's error when it wrote the queue but could not
// add it to its namespace's list (Queues): on Redis Cluster the list is on
// the master of the namespace's own slot, which may be down while the
// queue's is not. The queue works; calling EnsureQueue again lists it.
var ErrNotListed = errors.New("broker: queue not added to its namespace's list")

// raiseForFlow raises q to LayoutFlowControl unless it is there already; a
// *Error CodeWorkersBehind names the live workers that read only older
// layouts (flow control waits until they are rolled to this release).
func (b *Broker) raiseForFlow(ctx context.Context, q QueueRef) error {
	if n, err := b.QueueLayout(ctx, q); err != nil || n >= LayoutFlowControl {
		return err
	}
	behind, err := b.RaiseQueueLayout(ctx, q, LayoutFlowControl)
	if err != nil {
		return err
	}
	if len(behind) > 0 {
		return &Error{Code: CodeWorkersBehind, Message: fmt.Sprintf("flow control of queue %s waits for workers that read only "+
			"layouts older than %d (an earlier release): %s; it applies once they are rolled (docs/upgrade.md)", q, LayoutFlowControl, strings.Join(behind, ", "))}
	}
	return nil
}

func isBusyGroup(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && len(re.Error()) >= 9 && re.Error()[:9] == "BUSYGROUP"
}

// QueueConfig reads the config EnsureQueue wrote; ErrQueueNotFound when absent.
func (b *Broker) QueueConfig(ctx context.Context, q QueueRef) (QueueConfig, error) {
	k := keysFor(q)
	m, err := b.rdb.HGetAll(ctx, k.config()).Result()
	if err != nil {
		return QueueConfig{}, fmt.Errorf("broker: read config of %s: %w", q, err)
	}
	if len(m) == 0 {
		return QueueConfig{}, &Error{Code: CodeQueueNotFound, Message: "queue " + q.String() + " not found"}
	}
	var flow *FlowControl
	if t := m[cfgFlow]; t != "" {
		ov, err := b.rdb.HGetAll(ctx, k.flowOverrides()).Result()
		if err != nil {
			return QueueConfig{}, fmt.Errorf("broker: read flow overrides of %s: %w", q, err)
		}
		flow = parseFlow(t, ov)
	}
	i := func(f string) int64 { n, _ := strconv.ParseInt(m[f], 10, 64); return n }
	d := func(f string) time.Duration { return time.Duration(i(f)) * time.Millisecond }
	jitter, _ := strconv.ParseFloat(m[cfgRetryJitter], 64)
	return QueueConfig{
		MaxDepth:           i(cfgMaxDepth),
		MaxPayloadBytes:    i(cfgMaxPayload),
		DefaultMaxAttempts: int(i(cfgMaxAttempts)),
		DefaultTimeout:     d(cfgTimeout),
		Retry:              RetryPolicy{BaseDelay: d(cfgRetryBase), MaxDelay: d(cfgRetryMax), Jitter: jitter},
		IdempotencyTTL:     d(cfgIdemTTL),
		TaskRetention:      d(cfgTaskTTL),
		ResultRetention:    d(cfgResultTTL),
		ResultMaxBytes:     i(cfgResultMax),
		DeadLetter:         m[cfgDLQ] == "1",
		DeadLetterMaxLen:   i(cfgDLQMaxLen),
		VisibilityTimeout:  d(cfgVisibility),
		ReplicaAcks:        int(i(cfgReplicaAcks)),
		ReplicaAckTimeout:  d(cfgReplicaAckTimeout),
		Flow:               flow,
		OnMismatch:         cmp.Or(OnMismatch(m[cfgOnMismatch]), MismatchReplay),
	}, nil
}

// replyStrings converts a script's array reply of strings (false/nil for Lua
// false) into a slice of strings.
func replyStrings(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, len(arr))
	for i, x := range arr {
		out[i] = str(x)
	}
	return out
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// hashMap turns an HGETALL reply returned by a script into a map.
func hashMap(v any) map[string]string {
	arr, _ := v.([]any)
	m := make(map[string]string, len(arr)/2)
	for i := 0; i+1 < len(arr); i += 2 {
		m[str(arr[i])] = str(arr[i+1])
	}
	return m
}

// sharedScripter runs a script call on the client directly when no other call
// of it is in flight, and through go-redis's auto-pipeliner when one is, so
// concurrent calls share round trips while a lone call pays no hand-off to
// the pipeliner's goroutines (about 0.1 ms on an idle machine; see
// docs/benchmarks.md, "Idle latency").
type sharedScripter struct {
	redis.Scripter // the client
	pipe           *redis.AutoPipeliner
	inFlight       atomic.Int32
}

func (s *sharedScripter) pick() redis.Scripter {
	if s.inFlight.Add(1) == 1 {
		return s.Scripter
	}
	return s.pipe
}

func (s *sharedScripter) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	defer s.inFlight.Add(-1)
	return s.pick().EvalSha(ctx, sha1, keys, args...)
}

func (s *sharedScripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	defer s.inFlight.Add(-1)
	return s.pick().Eval(ctx, script, keys, args...)
}
