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
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis layout version (docs/upgrade.md, "Redis layout version"). A
// layout is the shape of dtq's keys and fields in Redis; a build reads the
// layouts MinLayout..MaxLayout and writes, on each queue, the layout that
// queue's record names. Two records say which layout data may be in:
//
//   - the global record, hash dtq:layout: field "layout" is the highest layout
//     any data in this Redis may be in (every manager and API must read it);
//     field "migrated" is the layout every key has been migrated to (the
//     manager's migrations raise it after each step). The manager writes it at
//     start when absent; the manager and the API check it.
//   - the queue record, field "layout" of the queue's config hash: the
//     highest layout that queue's data may be in. Workers check it: their
//     Redis user reaches only their namespace's keys, not dtq:layout.
//
// An absent record, or an absent field, is layout 1: what every release
// before the records existed wrote. A record is only ever raised, and the
// global one before any queue's (so it is never below a queue's).
const (
	// MinLayout is the oldest layout this build reads and writes.
	MinLayout = 1
	// MaxLayout is the newest layout this build reads and writes.
	MaxLayout = LayoutFlowControl
	// LayoutFlowControl is the layout of a queue with flow control (flow.go):
	// its tasks wait in per-key lists that workers of layout 1 do not read,
	// and its slots must be given back by every exit from Running. EnsureQueue
	// raises a queue to it before writing flow control (RaiseQueueLayout), so
	// only once every live worker of the queue reads it.
	LayoutFlowControl = 2
)

// layoutKey is the global record's hash. It is outside every queue's and
// namespace's hash tag, so namespace users (acl.go) cannot reach it.
const layoutKey = "dtq:layout"

// Fields of the records.
const (
	fieldLayout   = "layout"   // dtq:layout and each queue's config hash
	fieldMigrated = "migrated" // dtq:layout
)

// WithLayouts sets the layouts the Broker reads (default MinLayout..MaxLayout),
// for tests of the checks and of migrations to layouts this build does not
// have yet.
func WithLayouts(minLayout, maxLayout int) Option {
	return func(b *Broker) { b.minLayout, b.maxLayout = minLayout, maxLayout }
}

// Layouts returns the layouts the Broker reads and writes.
func (b *Broker) Layouts() (minLayout, maxLayout int) { return b.minLayout, b.maxLayout }

// ErrLayoutUnknown matches every *LayoutError (errors.Is).
var ErrLayoutUnknown = errors.New("redis layout unknown to this build")

// LayoutError says that Redis holds data in a layout this build cannot read.
type LayoutError struct {
	// Queue is the queue whose record was read; zero for the global record.
	Queue QueueRef
	// Found is the layout of the record; Migrated, for the global record, the
	// layout every key has been migrated to.
	Found, Migrated int
	// Min and Max are the layouts this build reads.
	Min, Max int
}

func (e *LayoutError) Error() string {
	where := "Redis holds dtq layout " + strconv.Itoa(e.Found)
	if e.Queue != (QueueRef{}) {
		where = fmt.Sprintf("queue %s in Redis holds dtq layout %d", e.Queue, e.Found)
	}
	if e.Found > e.Max {
		return fmt.Sprintf("%s; this binary reads layouts %d..%d: upgrade this component to a release that reads layout %d "+
			"(see docs/upgrade.md, \"Redis layout version\")", where, e.Min, e.Max, e.Found)
	}
	return fmt.Sprintf("%s, migrated only to layout %d; this binary reads layouts %d..%d: run a manager of an earlier release "+
		"until it has migrated every key to layout %d (see docs/upgrade.md, \"Redis layout version\")",
		where, e.Migrated, e.Min, e.Max, e.Min)
}

// Is makes errors.Is(err, ErrLayoutUnknown) true.
func (e *LayoutError) Is(target error) bool { return target == ErrLayoutUnknown }

// GlobalLayout is the global record: Layout is the highest layout any data
// may be in, Migrated the layout every key has been migrated to.
type GlobalLayout struct{ Layout, Migrated int }

// ReadLayout reads the global record (1 for an absent record or field).
func (b *Broker) ReadLayout(ctx context.Context) (GlobalLayout, error) {
	v, err := b.rdb.HMGet(ctx, layoutKey, fieldLayout, fieldMigrated).Result()
	if err != nil {
		return GlobalLayout{}, fmt.Errorf("broker: read %s: %w", layoutKey, err)
	}
	return GlobalLayout{Layout: layoutOf(v[0]), Migrated: layoutOf(v[1])}, nil
}

// layoutOf reads a record's field: 1 when absent or not a positive number.
func layoutOf(v any) int {
	s, _ := v.(string)
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return n
	}
	return 1
}

// CheckLayout reads the global record and returns a *LayoutError when this
// build cannot read it. It only reads: the manager and the API call it before
// they write anything, and again every LayoutCheckInterval (WatchLayout).
func (b *Broker) CheckLayout(ctx context.Context) error {
	g, err := b.ReadLayout(ctx)
	if err != nil {
		return err
	}
	if g.Layout > b.maxLayout || g.Migrated < b.minLayout {
		return &LayoutError{Found: g.Layout, Migrated: g.Migrated, Min: b.minLayout, Max: b.maxLayout}
	}
	return nil
}

// EnsureLayout writes the global record when it is absent, at layout 1 (what
// a Redis without a record holds), and checks it. Only the manager calls it,
// after CheckLayout.
func (b *Broker) EnsureLayout(ctx context.Context) error {
	if err := b.CheckLayout(ctx); err != nil {
		return err
	}
	if err := b.rdb.HSetNX(ctx, layoutKey, fieldLayout, 1).Err(); err != nil {
		return fmt.Errorf("broker: write %s: %w", layoutKey, err)
	}
	if err := b.rdb.HSetNX(ctx, layoutKey, fieldMigrated, 1).Err(); err != nil {
		return fmt.Errorf("broker: write %s: %w", layoutKey, err)
	}
	return nil
}

// QueueLayout reads q's record (1 when absent, and for a queue EnsureQueue
// has not created).
func (b *Broker) QueueLayout(ctx context.Context, q QueueRef) (int, error) {
	v, err := b.rdb.HGet(ctx, keysFor(q).config(), fieldLayout).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("broker: read layout of %s: %w", q, err)
	}
	return layoutOf(v), nil
}

// CheckQueueLayout reads q's record and returns a *LayoutError when this
// build cannot read it. It only reads, with the keys a namespace's workers
// may reach.
func (b *Broker) CheckQueueLayout(ctx context.Context, q QueueRef) error {
	n, err := b.QueueLayout(ctx, q)
	if err != nil {
		return err
	}
	if n > b.maxLayout {
		return &LayoutError{Queue: q, Found: n, Min: b.minLayout, Max: b.maxLayout}
	}
	return nil
}

// LayoutCheckInterval is how often WatchLayout re-reads a record.
const LayoutCheckInterval = 10 * time.Second

// WatchLayout runs check every interval until ctx ends. A check may fail
// because Redis is unreachable (it is tried again), or report a record this
// build cannot read (a *LayoutError): then WatchLayout calls stop with it
// once and returns. Re-reading covers a reconnect (to a failed-over master or
// a restored Redis) and a record raised while the binary runs.
func WatchLayout(ctx context.Context, interval time.Duration, check func(context.Context) error, stop func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, interval)
		err := check(cctx)
		cancel()
		if errors.Is(err, ErrLayoutUnknown) {
			stop(err)
			return
		}
	}
}

// raiseLayoutScript raises a layout field to ARGV[1] unless it is higher.
//
// KEYS[1]        -> dtq:layout
//
// ARGV[1]        -> the layout
// ARGV[2]        -> the field: layout or migrated
//
// Returns the field's layout afterwards.
var raiseLayoutScript = redis.NewScript(`
local cur = tonumber(redis.call("HGET", KEYS[1], ARGV[2])) or 1
local n = tonumber(ARGV[1])
if cur >= n then return cur end
redis.call("HSET", KEYS[1], ARGV[2], n)
return n
`)

func (b *Broker) raiseGlobal(ctx context.Context, field string, n int) error {
	if err := raiseLayoutScript.Run(ctx, b.rdb, []string{layoutKey}, n, field).Err(); err != nil {
		return fmt.Errorf("broker: raise %s %s to %d: %w", layoutKey, field, n, err)
	}
	return nil
}

// WorkersReadLayout reports whether every live worker registered on q
// (Heartbeat) reads layout n, and lists those that do not. A worker of a
// release before the layout version registered no layout: it reads layout 1.
// True for a queue without workers. Flow control and any other feature that
// older workers cannot run beside use it through RaiseQueueLayout.
func (b *Broker) WorkersReadLayout(ctx context.Context, q QueueRef, n int) (bool, []string, error) {
	ws, err := b.Workers(ctx, q)
	if err != nil {
		return false, nil, err
	}
	var behind []string
	for _, w := range ws {
		if w.Layout < n {
			behind = append(behind, w.ID)
		}
	}
	return len(behind) == 0, behind, nil
}

// raiseQueueLayoutScript raises a queue's record to ARGV[2] when every live
// worker of the queue reads it. In one script with the workers' registration
// (heartbeatScript), so a worker either registers before the raise (and is
// counted) or after it (and is refused).
//
// KEYS[1]        -> dtq:{<ns>/<q>}:config
// KEYS[2]        -> dtq:{<ns>/<q>}:workers
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> the layout
//
// Returns {0} when the queue does not exist, {1} when its record is (now) at
// least ARGV[2], else {2, id...}: the live workers reading an older layout.
var raiseQueueLayoutScript = redis.NewScript(fmt.Sprintf(`
if redis.call("EXISTS", KEYS[1]) == 0 then return {0} end
local n = tonumber(ARGV[2])
if (tonumber(redis.call("HGET", KEYS[1], %[1]q)) or 1) >= n then return {1} end
local behind = {2}
for _, id in ipairs(redis.call("ZRANGE", KEYS[2], 0, -1)) do
  local w = ARGV[1] .. %[2]q .. id
  if redis.call("EXISTS", w) == 1 and (tonumber(redis.call("HGET", w, %[1]q)) or 1) < n then
    behind[#behind + 1] = id
  end
end
if #behind > 1 then return behind end
redis.call("HSET", KEYS[1], %[1]q, n)
return {1}
`, fieldLayout, sufWorker))

// RaiseQueueLayout raises q's record to layout n, so that workers reading
// only older layouts refuse to work on q (at start, and at their next
// heartbeat when they run), but only when every live worker of q reads n:
// otherwise it changes nothing on q and returns those workers. It raises the
// global record to n first, so managers and APIs of older releases stop too.
// A queue EnsureQueue has not created is left alone (ErrQueueNotFound). Only
// the manager calls it, before it writes data of layout n into q.
func (b *Broker) RaiseQueueLayout(ctx context.Context, q QueueRef, n int) (behind []string, err error) {
	if n > b.maxLayout {
		return nil, fmt.Errorf("broker: raise %s to layout %d: this build reads layouts up to %d", q, n, b.maxLayout)
	}
	if ok, behind, err := b.WorkersReadLayout(ctx, q, n); err != nil || !ok {
		return behind, err
	}
	if err := b.raiseGlobal(ctx, fieldLayout, n); err != nil {
		return nil, err
	}
	k := keysFor(q)
	res, err := raiseQueueLayoutScript.Run(ctx, b.rdb, k.guarded(k.config(), k.workers()), k.prefix, n).Slice()
	if err != nil {
		return nil, fmt.Errorf("broker: raise %s to layout %d: %w", q, n, err)
	}
	switch {
	case len(res) > 1:
		return replyStrings(res[1:]), nil
	case res[0] == int64(0):
		return nil, &Error{Code: CodeQueueNotFound, Message: "queue " + q.String() + " not found"}
	}
	return nil, nil
}
