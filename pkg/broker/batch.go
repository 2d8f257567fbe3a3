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
	"sync"
	"sync/atomic"
	"time"
)

// Batching of the hot path. On Redis a script call has a fixed cost (EVALSHA,
// the first write, the config read, Submit's ten XLENs of the depth gate) that
// is larger than the per-task work, so concurrent Submit, Start and Complete
// calls on one queue are coalesced into one script call that processes the
// items in order, each with exactly the semantics of a call on its own (see
// the batch scripts in scripts.go).
//
// A batcher never waits to fill a batch: the first caller of an idle batcher
// starts a flusher at once, which takes that item and whatever else is already
// waiting (up to maxBatch); while a flush is in Redis new callers queue up and
// the next flush takes them. At most flights flushes per queue and
// operation run at the same time (batches of different queues and operations
// still share round trips through the auto-pipeliner). A lone caller
// therefore pays only a goroutine hand-off.
//
// Submit runs one flush at a time (submitFlights): two halve the batches of
// 16 producers and cost Redis more per task than the overlap saves. Start
// runs one (it serves reclaimed and explicitly started entries; a read starts
// its own). Complete runs two (completeFlights): a worker's slots wait on their
// completion for their next entry (CompleteNext), so with one flush Redis
// idled while the worker handled the last batch's entries; with two, Redis
// works on one batch while the worker runs the other's tasks, at the same
// Redis CPU per task (docs/benchmarks.md, "Packed replies, two completions
// in flight").
const (
	maxBatch        = 128
	submitFlights   = 1
	startFlights    = 1
	completeFlights = 2
)

// batchCall is one caller's item.
type batchCall[Req, Res any] struct {
	ctx       context.Context
	req       Req
	res       Res
	err       error
	done      chan struct{}
	cancelled bool // the caller gave up; a flusher skips it if still waiting (under batcher.mu)
}

// batcher coalesces concurrent calls of one operation on one queue. run gets the
// requests in arrival order and returns one result and error per request, or a
// single error (a failed script or connection) that every caller gets.
type batcher[Req, Res any] struct {
	run        func(ctx context.Context, reqs []Req) ([]Res, []error, error)
	maxFlights int // flushes at a time

	mu      sync.Mutex
	waiting []*batchCall[Req, Res]
	flights int
}

func newBatcher[Req, Res any](flights int, run func(context.Context, []Req) ([]Res, []error, error)) *batcher[Req, Res] {
	return &batcher[Req, Res]{run: run, maxFlights: flights}
}

// do queues req and waits for its result. When ctx ends before a flusher took
// the item, nothing of it reaches Redis; when it ends while the batch is in
// Redis, do returns ctx.Err() and the item may or may not have been applied
// (like any Redis call cancelled after it was sent).
func (bt *batcher[Req, Res]) do(ctx context.Context, req Req) (Res, error) {
	var zero Res
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	c := &batchCall[Req, Res]{ctx: ctx, req: req, done: make(chan struct{})}
	bt.mu.Lock()
	bt.waiting = append(bt.waiting, c)
	if bt.flights < bt.maxFlights {
		bt.flights++
		go bt.flush()
	}
	bt.mu.Unlock()
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		bt.mu.Lock()
		c.cancelled = true
		bt.mu.Unlock()
		return zero, ctx.Err()
	}
}

// flush runs batches until nothing is waiting.
func (bt *batcher[Req, Res]) flush() {
	batch := make([]*batchCall[Req, Res], 0, 16)
	reqs := make([]Req, 0, 16)
	for {
		batch, reqs = batch[:0], reqs[:0]
		bt.mu.Lock()
		i := 0
		for ; i < len(bt.waiting) && len(batch) < maxBatch; i++ {
			c := bt.waiting[i]
			if c.cancelled {
				continue
			}
			batch = append(batch, c)
			reqs = append(reqs, c.req)
		}
		n := copy(bt.waiting, bt.waiting[i:])
		clear(bt.waiting[n:])
		bt.waiting = bt.waiting[:n]
		if len(batch) == 0 {
			bt.flights--
			bt.mu.Unlock()
			return
		}
		bt.mu.Unlock()

		ctx, cancel := batchContext(batch)
		res, errs, err := bt.run(ctx, reqs)
		cancel()
		for i, c := range batch {
			switch {
			case err != nil:
				c.err = err
			default:
				c.res = res[i]
				if errs != nil {
					c.err = errs[i]
				}
			}
			close(c.done)
		}
	}
}

// batchContext is the context a batch runs with: no caller's cancellation (one
// caller giving up must not fail the others), the values of the first, and the
// latest of the callers' deadlines when every caller has one.
func batchContext[Req, Res any](batch []*batchCall[Req, Res]) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.WithoutCancel(batch[0].ctx), func() {}
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(batch[0].ctx), last)
}

// queueBatchers holds the batchers of one queue.
type queueBatchers struct {
	submit   *batcher[submitItem, SubmitResult]
	start    *batcher[startItem, StartResult]
	complete *batcher[completeItem, completed]
	// ack is the queue's replica acknowledgement as last read (see writer).
	ack atomic.Pointer[ackSetting]
}

// batchers returns q's batchers, creating them on first use.
func (b *Broker) batchers(q QueueRef) *queueBatchers {
	if v, ok := b.queues.Load(q); ok {
		return v.(*queueBatchers)
	}
	qb := &queueBatchers{
		submit: newBatcher(submitFlights, func(ctx context.Context, items []submitItem) ([]SubmitResult, []error, error) {
			return b.submitBatch(ctx, q, items)
		}),
		start: newBatcher(startFlights, func(ctx context.Context, items []startItem) ([]StartResult, []error, error) {
			return b.startBatch(ctx, q, items)
		}),
		complete: newBatcher(completeFlights, func(ctx context.Context, items []completeItem) ([]completed, []error, error) {
			return b.completeBatch(ctx, q, items)
		}),
	}
	v, _ := b.queues.LoadOrStore(q, qb)
	return v.(*queueBatchers)
}
