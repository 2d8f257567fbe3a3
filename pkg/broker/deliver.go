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
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/wait"
)

// Read delivers up to count new entries to consumer across the ten bands, p9
// first, blocking up to block when all are empty. Paused queues return nothing
// (after waiting block, so idle readers do not spin).
//
// XREADGROUP's COUNT applies per stream (original defect 8), so reading all
// bands in one call could hand out up to 10x count entries. Instead one script
// reads the bands in order, each with COUNT set to what is still missing, so
// the total never exceeds count and nothing read is left undelivered. When
// nothing is ready, Read blocks on a plain XREAD of the ten streams after
// their newest entries (which consumes nothing) and reads again on wake-up.
func (b *Broker) Read(ctx context.Context, q QueueRef, consumer string, count int, block time.Duration) ([]Delivery, error) {
	if count <= 0 {
		return nil, nil
	}
	entries, err := b.read(ctx, q, block, readScript, consumer, count, 4, nil)
	if err != nil {
		return nil, err
	}
	out := make([]Delivery, 0, len(entries))
	for _, e := range entries {
		out = append(out, deliveryOfEntry(e))
	}
	return out, nil
}

// Started is one entry delivered by ReadStart with its start decision. Err is
// set when Redis failed on that entry alone: it then stays pending, unstarted,
// and is reclaimed after the visibility timeout.
type Started struct {
	Delivery
	StartResult
	Err error
}

// ReadStart is Read followed by Start of every delivered entry, in one script
// call: up to count new entries across the bands, p9 first, each decided
// exactly as Start decides a (not reclaimed) delivery for workerID. Entries
// that do not run (Run false: duplicate, cancelled, expired, terminal, ...) are
// already acknowledged and count toward count. It blocks like Read when
// nothing is ready; when ctx ends meanwhile it returns ctx's error once the
// wait ends (go-redis does not cut a blocking XREAD short), starting nothing.
//
// An entry returned with Run true is Running with its entry pending for
// consumer: a worker that stops before executing it must leave it so (never
// Complete it); a peer reclaims it after the visibility timeout and runs it
// as a crash redelivery (attempt+1, bounded by max attempts).
func (b *Broker) ReadStart(ctx context.Context, q QueueRef, consumer, workerID string, count int, block time.Duration) ([]Started, error) {
	if count <= 0 {
		return nil, nil
	}
	entries, err := b.read(ctx, q, block, readStartScript, consumer, count, readStartFields, func() []any {
		now, nowtxt := b.now() // taken afresh for each script call
		return []any{now, nowtxt, workerID, b.rateNow()}
	})
	if err != nil {
		return nil, err
	}
	return startedOf(q, entries), nil
}

// readStartFields is the fields of each entry readStartScript returns.
const readStartFields = 5

// startedOf maps readStartScript's entries.
func startedOf(q QueueRef, entries [][]any) []Started {
	out := make([]Started, 0, len(entries))
	for _, e := range entries {
		st := Started{Delivery: deliveryOfEntry(e)}
		if v, err := itemReply(e[4]); err != nil {
			st.Err = err
		} else {
			st.StartResult, st.Err = startReply(q, v)
		}
		out = append(out, st)
	}
	return out
}

// read runs a read script (readScript, readStartScript: KEYS streams p0..p9,
// paused, flow and fc:mig; ARGV prefix, consumer, count, then extra(), if set; each entry
// has at least fields fields) until it delivers,
// blocking up to block in between: paused queues return nothing after waiting
// block (so idle readers do not spin); when nothing is ready it blocks on a
// plain XREAD of the ten streams after their newest entries (which consumes
// nothing) and runs the script again on wake-up. On a flow-controlled queue
// whose limits admit nothing now it waits instead for a wake token
// (waitWake), up to the time a rate limit admits again when the script
// names one.
func (b *Broker) read(ctx context.Context, q QueueRef, block time.Duration, sc *redis.Script, consumer string, count, fields int, extra func() []any) ([][]any, error) {
	k := keysFor(q)
	streams := k.streams()
	keys := k.guarded(append(append([]string{}, streams...), k.paused(), k.flow(), k.flowMigrate())...)
	deadline := time.Now().Add(block)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err // ended while waiting: read nothing more
		}
		argv := []any{k.prefix, consumer, count}
		if extra != nil {
			argv = append(argv, extra()...)
		}
		// Not sent twice: a second send would read further entries, and
		// those of the first would wait for the visibility timeout.
		v, err := runOnce(ctx, b.rdb, sc, keys, argv...).Slice()
		if err != nil {
			return nil, fmt.Errorf("broker: read %s: %w", q, err)
		}
		switch str(v[0]) {
		case "ok":
			return readEntries(q, v, fields)
		case "paused":
			return nil, wait.Sleep(ctx, block)
		case "flow":
			return nil, fmt.Errorf("broker: read %s: a flow-controlled queue's tasks start only through ReadStart", q)
		case "again":
			continue
		}
		left := time.Until(deadline)
		if block <= 0 || left < time.Millisecond {
			return nil, nil
		}
		if str(v[0]) == "wait" {
			if us := num(v[1]); us >= 0 {
				// A rate's next start, a little late rather than early: an
				// early claim is refused and waits again.
				left = min(left, wait.Jitter(time.Duration(us)*time.Microsecond*21/20, 0.05))
			}
			if err := b.waitWake(ctx, q, left); err != nil {
				return nil, err
			}
			continue
		}
		last := replyStrings(v[1])
		err = b.rdb.XRead(ctx, &redis.XReadArgs{Streams: append(append([]string{}, streams...), last...), Count: 1, Block: left}).Err()
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("broker: wait for %s: %w", q, err)
		}
	}
}

// readEntries returns the entries of a read script's "ok" reply v, each
// with at least fields fields. An entry of readStartScript that runs comes as
// one string, "band entry-id task-id attempt run <the task packed>", and is
// returned as the table it stands for.
func readEntries(q QueueRef, v []any, fields int) ([][]any, error) {
	entries, _ := v[1].([]any)
	out := make([][]any, 0, len(entries))
	for _, e := range entries {
		f, _ := e.([]any)
		if s, ok := e.(string); ok {
			if p := strings.SplitN(s, " ", 6); len(p) == 6 {
				band, _ := strconv.ParseInt(p[0], 10, 64)
				f = []any{band, p[1], p[2], p[3], []any{p[4], p[5]}}
			}
		}
		if len(f) < fields {
			return nil, fmt.Errorf("broker: read %s: unexpected entry %v", q, e)
		}
		out = append(out, f)
	}
	return out, nil
}

// deliveryOfEntry maps a read script's {band, entry id, task id, attempt}.
func deliveryOfEntry(f []any) Delivery {
	band, _ := f[0].(int64)
	attempt, _ := strconv.Atoi(str(f[3]))
	return Delivery{MessageID: str(f[1]), Band: int(band), TaskID: str(f[2]), Attempt: attempt}
}

// startReply maps one start_entry reply, {reason, the task packed} (see
// itemReply).
func startReply(q QueueRef, v []any) (StartResult, error) {
	var t TaskInfo
	ok := len(v) == 2
	if ok {
		t, ok = taskFromPacked(q, str(v[1]))
	}
	if !ok {
		return StartResult{}, fmt.Errorf("unexpected reply %v", v)
	}
	reason := str(v[0])
	return StartResult{Run: reason == "run", Task: t, Reason: reason}, nil
}

// Reclaim takes over up to count entries idle longer than minIdle (the visibility
// timeout) with XAUTOCLAIM, p9 first; the deliveries have Reclaimed set.
// Entries deleted meanwhile are dropped from the pending list by XAUTOCLAIM.
func (b *Broker) Reclaim(ctx context.Context, q QueueRef, consumer string, minIdle time.Duration, count int) ([]Delivery, error) {
	k := keysFor(q)
	// On a sticky connection, which go-redis never sends an XAUTOCLAIM again:
	// a second send would claim further entries, and those of the first
	// would wait for another visibility timeout.
	node, err := nodeOf(ctx, b.rdb, []string{k.stream(0)})
	if err != nil {
		return nil, fmt.Errorf("broker: reclaim %s: %w", q, err)
	}
	cn := node.Conn()
	defer cn.Close()
	var out []Delivery
	for band := Bands - 1; band >= 0 && len(out) < count; band-- {
		start := "0-0"
		for len(out) < count {
			msgs, next, err := cn.XAutoClaim(ctx, &redis.XAutoClaimArgs{
				Stream: k.stream(band), Group: group, MinIdle: minIdle, Start: start,
				Count: int64(count - len(out)), Consumer: consumer,
			}).Result()
			if err != nil {
				return out, fmt.Errorf("broker: reclaim %s p%d: %w", q, band, err)
			}
			for _, m := range msgs {
				out = append(out, deliveryOf(band, m, true))
			}
			if next == "0-0" || next == "" {
				break
			}
			start = next
		}
	}
	return out, nil
}

func deliveryOf(band int, m redis.XMessage, reclaimed bool) Delivery {
	id, _ := m.Values["t"].(string)
	a, _ := m.Values["a"].(string)
	attempt, _ := strconv.Atoi(a)
	return Delivery{MessageID: m.ID, Band: band, TaskID: id, Attempt: attempt, Reclaimed: reclaimed}
}

// Start decides, in one script, whether d runs: absorbed duplicate, cancelled,
// expired, terminal, or (a reclaimed entry, attempt+1) past maxAttempts and so
// dead-lettered, all ACK the entry and return Run false; otherwise the task moves
// to Running with workerID and the TaskStarted event, and Run is true.
//
// A crash redelivery is a reclaimed copy of the entry the task is running
// (the task hash remembers the entry ID); any other entry of a Running task is
// a duplicate and absorbed.
//
// Concurrent Starts on one queue are coalesced into one script call (see
// batch.go), each decided exactly as if alone.
func (b *Broker) Start(ctx context.Context, q QueueRef, workerID string, d Delivery) (StartResult, error) {
	r, err := b.batchers(q).start.do(ctx, startItem{worker: workerID, d: d})
	if err != nil {
		return StartResult{}, fmt.Errorf("broker: start %s: %w", d.TaskID, err)
	}
	return r, nil
}

// startItem is one Start in a batch.
type startItem struct {
	worker string
	d      Delivery
}

// startBatch runs startBatchScript for items and maps each item's reply.
func (b *Broker) startBatch(ctx context.Context, q QueueRef, items []startItem) ([]StartResult, []error, error) {
	k := keysFor(q)
	now, nowtxt := b.now()
	keys := make([]string, 0, 2*len(items)+1)
	args := make([]any, 0, 4+startItemArgs*len(items))
	args = append(args, k.prefix, now, nowtxt, b.rateNow())
	for _, it := range items {
		reclaimed := 0
		if it.d.Reclaimed {
			reclaimed = 1
		}
		keys = append(keys, k.task(it.d.TaskID), k.stream(it.d.Band))
		//nolint:staticcheck // ST1023: [...] against the declared width: a missing or extra argument does not compile
		var item [startItemArgs]any = [...]any{it.d.MessageID, it.d.Attempt, reclaimed, it.worker}
		args = append(args, item[:]...)
	}
	replies, err := startBatchScript.Run(ctx, b.fast, k.guarded(keys...), args...).Slice()
	if err != nil {
		return nil, nil, err
	}
	return itemReplies(replies, len(items), func(_ int, v []any) (StartResult, error) { return startReply(q, v) })
}

// maxErrorLen bounds stored error messages (in characters).
const maxErrorLen = 500

// newlines turns each line break into a space.
var newlines = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

// sanitizeError turns newlines into spaces and cuts the message to 500 characters.
func sanitizeError(s string) string {
	s = newlines.Replace(s)
	if r := []rune(s); len(r) > maxErrorLen {
		s = string(r[:maxErrorLen])
	}
	return s
}

// Complete records an execution's outcome in the seed's write order (task hash,
// event, result, idempotency record with SET XX) and ends with XACK+XDEL, all in
// one script. It returns the state the task moved to (Succeeded, Retrying,
// Failed, DeadLettered or Cancelled).
//
// Complete is fenced on x: when x is no longer the task's running execution
// (another worker reclaimed the entry and started attempt+1, or the task
// ended), nothing changes, the entry is left to whoever runs it, and the error
// is ErrStaleExecution with the task's current state. Completing the same
// execution again (a retry after a lost reply) returns the state it recorded.
//
// A result that is not valid JSON is a permanent failure; a result longer than
// ResultMaxBytes is stored as a JSON string of its first ResultMaxBytes bytes
// with ResultTruncated set.
//
// Concurrent Completes on one queue are coalesced into one script call (see
// batch.go), each recorded exactly as if alone.
func (b *Broker) Complete(ctx context.Context, q QueueRef, x Execution, out Outcome) (State, error) {
	st, _, err := b.complete(ctx, q, x, out, "")
	return st, err
}

// CompleteNext is Complete that also reads and starts, in the same round
// trip, up to one new entry for consumer (ReadStart without blocking, for
// x's worker): a worker slot that finished a task gets its next one without
// a second round trip. next is nil when nothing was ready (or the queue is
// paused, or its completions wait for replicas); a next entry with Run true
// must be executed or left pending exactly as ReadStart says. The completion and the read are independent:
// an error of the read alone is next's Err, and the state is still valid.
func (b *Broker) CompleteNext(ctx context.Context, q QueueRef, x Execution, out Outcome, consumer string) (State, *Started, error) {
	return b.complete(ctx, q, x, out, consumer)
}

func (b *Broker) complete(ctx context.Context, q QueueRef, x Execution, out Outcome, next string) (State, *Started, error) {
	kind, result := "ok", []byte(out.Result)
	switch {
	case out.Cancelled:
		kind = "cancel"
	case out.Err != "":
		kind = "error"
	case len(result) == 0:
		// no result: nothing is stored
	case !json.Valid(result):
		kind, out = "error", Outcome{Err: "handler result is not valid JSON", ErrorClass: "InvalidResult"}
	}
	retryable := "0"
	if out.Retryable {
		retryable = "1"
	}
	c, err := b.batchers(q).complete.do(ctx, completeItem{x: x, kind: kind, result: result,
		err: sanitizeError(out.Err), class: out.ErrorClass, retryable: retryable, next: next})
	if err != nil && CodeOf(err) == "" {
		return "", nil, fmt.Errorf("broker: complete %s: %w", x.TaskID, err)
	}
	return c.state, c.next, err
}

// completeItem is one Complete in a batch.
type completeItem struct {
	x          Execution
	kind       string
	result     []byte
	err, class string
	retryable  string
	next       string // consumer that reads its next entry with this completion (CompleteNext)
}

// completeItemFields is the number of fields of a packed complete item
// (packCompleteItem).
const completeItemFields = 9

// packCompleteItem appends it packed to dst, completeItemFields fields in the
// order completeBatchScript unpacks them (see the script's ARGV).
func packCompleteItem(dst []byte, it completeItem) []byte {
	jitter := "0" // only a retry reads it
	if it.retryable == "1" {
		jitter = strconv.FormatFloat(rand.Float64()*2-1, 'f', 6, 64)
	}
	var attempt [20]byte
	dst = append(dst, packVersion)
	dst = appendField(dst, it.x.MessageID)
	dst = appendField(dst, it.x.WorkerID)
	dst = appendField(dst, strconv.AppendInt(attempt[:0], int64(it.x.Attempt), 10))
	dst = appendField(dst, it.kind)
	dst = appendField(dst, it.result)
	for _, f := range [...]string{it.err, it.class, it.retryable, jitter} {
		dst = appendField(dst, f)
	}
	return dst
}

// completed is one completion's reply: the task's state and, for
// CompleteNext, the next entry.
type completed struct {
	state State
	next  *Started
}

// completeBatch runs completeBatchScript for items and maps each item's
// reply. When items ask for their next entries (CompleteNext), one
// readStartScript call for as many entries, without blocking, goes in the
// same pipeline; only the items of the first asking consumer get entries
// (one Server per Broker and queue is the norm). A queue whose completions
// wait for replicas (spec.durability) reads none: its slots read through
// the blocking read.
func (b *Broker) completeBatch(ctx context.Context, q QueueRef, items []completeItem) ([]completed, []error, error) {
	k := keysFor(q)
	now, nowtxt := b.now()
	keys := make([]string, 0, 3+2*len(items))
	keys = append(keys, k.config(), k.schedule())
	args := make([]any, 0, 4+completeItemArgs*len(items))
	args = append(args, k.prefix, now, nowtxt, 0) // args[3]: the entries read with it, set below
	// The items are packed into one buffer, each argument a slice of it
	// capped at its end, so later items never write into it (when the buffer
	// grows, earlier slices keep the old array).
	buf := make([]byte, 0, 128*len(items))
	consumer, workerID, wants := "", "", 0
	for _, it := range items {
		keys = append(keys, k.task(it.x.TaskID), k.stream(it.x.Band))
		start := len(buf)
		buf = packCompleteItem(buf, it)
		args = append(args, buf[start:len(buf):len(buf)])
		if it.next != "" && (consumer == "" || it.next == consumer) {
			consumer, workerID = it.next, it.x.WorkerID
			wants++
		}
	}
	keys = k.guarded(keys...)
	sc, err := b.writer(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	var replies []any
	var started []Started
	var readErr error
	reads := wants > 0 && sc == b.fast
	if reads {
		args[3] = wants
	}
	if !reads {
		// Without a next read, or when the completion waits for replicas
		// (then the slots read their next entries through the blocking read).
		if replies, err = completeBatchScript.Run(ctx, sc, keys, args...).Slice(); err != nil {
			return nil, nil, err
		}
	} else if replies, started, readErr, err = b.completeRead(ctx, q, keys, args, consumer, workerID, wants); err != nil {
		return nil, nil, err
	}
	out, errs, err := itemReplies(replies, len(items), func(i int, v []any) (completed, error) {
		st, err := staleOr(items[i].x, v)
		return completed{state: st}, err
	})
	if err != nil {
		// Entries read are left pending, reclaimed after the visibility timeout.
		return nil, nil, err
	}
	// Each asking item gets one entry, whatever its own completion's reply.
	for i, it := range items {
		if it.next == "" || it.next != consumer {
			continue
		}
		switch {
		case readErr != nil:
			out[i].next = &Started{Err: readErr}
		case len(started) > 0:
			out[i].next, started = &started[0], started[1:]
		}
	}
	return out, errs, nil
}

// completeRead runs completeBatchScript (keys, args) and a non-blocking
// readStartScript of count entries for consumer in one pipeline (one round
// trip); a script Redis no longer has (NOSCRIPT, after a restart or a
// failover) is run again on its own. err fails the completion; readErr only
// the read.
func (b *Broker) completeRead(ctx context.Context, q QueueRef, keys []string, args []any, consumer, workerID string, count int) (replies []any, started []Started, readErr, err error) {
	k := keysFor(q)
	rkeys := k.guarded(append(k.streams(), k.paused(), k.flow(), k.flowMigrate())...)
	now, nowtxt := b.now()
	rargs := []any{k.prefix, consumer, count, now, nowtxt, workerID, b.rateNow()}
	pipe := b.rdb.Pipeline()
	cc := completeBatchScript.EvalSha(ctx, pipe, keys, args...)
	// Never sent again, and so neither is the pipeline (see read).
	rc := readStartScript.EvalSha(ctx, onceScripter{pipe}, rkeys, rargs...)
	_, _ = pipe.Exec(ctx)
	if err := cc.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cc = completeBatchScript.Run(ctx, b.rdb, keys, args...)
	}
	if replies, err = cc.Slice(); err != nil {
		return nil, nil, nil, err
	}
	if err := rc.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		rc = runOnce(ctx, b.rdb, readStartScript, rkeys, rargs...)
	}
	v, err := rc.Slice()
	if err != nil {
		return replies, nil, fmt.Errorf("broker: read %s: %w", q, err), nil
	}
	if str(v[0]) != "ok" {
		return replies, nil, nil, nil // nothing ready (or the limits admit nothing now), or paused
	}
	entries, err := readEntries(q, v, readStartFields)
	if err != nil {
		return replies, nil, err, nil
	}
	return replies, startedOf(q, entries), nil, nil
}

// itemReplies maps a batch script's replies, one per item in order, with each
// (given the fields of a reply that itemReply accepts).
func itemReplies[T any](replies []any, n int, each func(i int, v []any) (T, error)) ([]T, []error, error) {
	if len(replies) != n {
		return nil, nil, fmt.Errorf("%d replies for %d items", len(replies), n)
	}
	out := make([]T, n)
	errs := make([]error, n)
	for i, x := range replies {
		v, err := itemReply(x)
		if err != nil {
			errs[i] = err
			continue
		}
		out[i], errs[i] = each(i, v)
	}
	return out, errs, nil
}

// itemReply is one item's reply of a batch or read script: its fields, or the
// error of an {"err", message} reply (a Redis error in that item only). An
// item may also be one string, its fields joined by spaces (fields that hold
// no space): a script's common answer costs Redis less that way than a table.
func itemReply(x any) ([]any, error) {
	if s, ok := x.(string); ok {
		f := strings.Split(s, " ")
		v := make([]any, len(f))
		for i := range f {
			v[i] = f[i]
		}
		return v, nil
	}
	v, _ := x.([]any)
	switch {
	case len(v) == 0:
		return nil, fmt.Errorf("unexpected reply %v", x)
	case len(v) == 2 && str(v[0]) == "err":
		return nil, replyError(str(v[1]))
	}
	return v, nil
}

// replyError is the Redis error reply of one item of a batch script (a
// redis.Error, as the reply to a command is).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// Touch resets the idle time of in-flight executions' entries (XCLAIM JUSTID,
// idle 0) so a live worker's long tasks are not reclaimed. It is fenced like
// Complete: an entry another worker has reclaimed (or whose task is no longer
// Running that execution) is not touched, and comes back in lost: its handler
// should stop, since another worker runs or will run the task.
func (b *Broker) Touch(ctx context.Context, q QueueRef, consumer string, xs []Execution) (lost []Execution, err error) {
	if len(xs) == 0 {
		return nil, nil
	}
	k := keysFor(q)
	keys := make([]string, 0, 2*len(xs)+1)
	args := make([]any, 0, 2+touchItemArgs*len(xs))
	args = append(args, k.prefix, consumer)
	for _, x := range xs {
		keys = append(keys, k.task(x.TaskID), k.stream(x.Band))
		//nolint:staticcheck // ST1023: [...] against the declared width: a missing or extra argument does not compile
		var item [touchItemArgs]any = [...]any{x.MessageID, x.WorkerID, x.Attempt}
		args = append(args, item[:]...)
	}
	pos, err := touchScript.Run(ctx, b.rdb, k.guarded(keys...), args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("broker: touch %s: %w", q, err)
	}
	for _, p := range pos {
		if p >= 1 && int(p) <= len(xs) {
			lost = append(lost, xs[p-1])
		}
	}
	return lost, nil
}

// CancelRequested returns the subset of ids whose cancel was requested, or
// whose task is gone (its queue was deleted): their handlers should stop.
func (b *Broker) CancelRequested(ctx context.Context, q QueueRef, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	k := keysFor(q)
	cmds := make([]*redis.SliceCmd, len(ids))
	_, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HMGet(ctx, k.task(id), "state", "cancel_requested")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("broker: cancel flags of %s: %w", q, err)
	}
	var out []string
	for i, c := range cmds {
		if v := c.Val(); len(v) == 2 && (v[0] == nil || v[1] == "1") {
			out = append(out, ids[i])
		}
	}
	return out, nil
}
