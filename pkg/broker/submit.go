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
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/tracing"
)

const (
	maxIDLen   = 64
	maxTypeLen = 253
	maxKeyLen  = 256
)

// MaxMetadataBytes limits a submission's metadata object (compact JSON), as
// the original's 4 KB.
const MaxMetadataBytes = 4096

// validID reports whether id matches [A-Za-z0-9_-]{1,64}; only such IDs appear
// in keys, records and stream entries.
func validID(id string) bool {
	if id == "" || len(id) > maxIDLen {
		return false
	}
	for _, c := range []byte(id) {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// invalid is an INVALID_TASK error about field (named as in the HTTP API).
func invalid(field, format string, a ...any) error {
	return &Error{Code: CodeInvalidTask, Field: field, Message: fmt.Sprintf(format, a...)}
}

// NewTaskID returns a random 32-hex-digit task ID.
func NewTaskID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// compactPayload validates that p is a JSON object ({} when empty) and returns
// its compact encoding, whose length is what MaxPayloadBytes limits.
func compactPayload(p json.RawMessage) ([]byte, error) {
	return compactObject("payload", p, []byte("{}"))
}

// compactMetadata validates that m is a JSON object of at most
// MaxMetadataBytes compact; empty and {} give nil (nothing stored).
func compactMetadata(m json.RawMessage) ([]byte, error) {
	out, err := compactObject("metadata", m, nil)
	if err != nil || string(out) == "{}" {
		return nil, err
	}
	if len(out) > MaxMetadataBytes {
		return nil, invalid("metadata", "metadata is %d bytes, limit %d", len(out), MaxMetadataBytes)
	}
	return out, nil
}

// compactObject returns the compact encoding of the JSON object v (field names
// the field in errors), or empty when v is empty. A v without any white space
// that is a valid object is compact already and returned as it is (the
// common case of a payload marshalled by a program), without re-encoding.
func compactObject(field string, v json.RawMessage, empty []byte) ([]byte, error) {
	if len(bytes.TrimSpace(v)) == 0 {
		return empty, nil
	}
	if v[0] == '{' && !bytes.ContainsAny(v, " \t\r\n") && json.Valid(v) {
		return v, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(v))
	if err := json.Compact(&buf, v); err != nil {
		return nil, invalid(field, "%s is not valid JSON: %v", field, err)
	}
	if buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return nil, invalid(field, "%s must be a JSON object", field)
	}
	return buf.Bytes(), nil
}

func validate(req SubmitRequest) error {
	switch {
	case req.ID != "" && !validID(req.ID):
		return invalid("task_id", "id must match [A-Za-z0-9_-]{1,64}")
	case req.Type == "" || len(req.Type) > maxTypeLen:
		return invalid("task_type", "type must be 1..%d bytes", maxTypeLen)
	case len(req.IdempotencyKey) > maxKeyLen:
		return invalid("idempotency_key", "idempotency key must be 1..%d bytes", maxKeyLen)
	case req.Priority < 0 || req.Priority > 9:
		return invalid("priority", "priority must be 0..9")
	case req.MaxAttempts < 0 || req.MaxAttempts > MaxAttemptsCap:
		return invalid("max_attempts", "maxAttempts must be 1..%d", MaxAttemptsCap)
	case req.Timeout != 0 && (req.Timeout < time.Millisecond || req.Timeout > time.Hour):
		return invalid("timeout_ms", "timeout must be 1ms..1h")
	case !validFlowKey(req.FlowKey, true):
		return invalid("flow_key", "flow key must be 1..%d visible ASCII characters (no spaces)", MaxFlowKeyBytes)
	}
	return nil
}

func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// Submit ingests a task with the five idempotency cases of DESIGN section 4 in one
// script: replay (Duplicate), in progress (ErrIdempotencyInProgress with TaskID),
// stale record (new work), full (ErrQueueFull, nothing written), new task. Submit
// with an ID that already exists returns that task with Duplicate set, so a
// caller deriving IDs (the controller uses the CR's UID) never ingests twice.
//
// The request is validated here (INVALID_TASK); the payload limit and depth gate
// come from the queue's config and are checked in the script (PAYLOAD_TOO_LARGE
// before the depth gate, replays before both). The gate counts every
// unfinished task, delayed and retrying ones in the schedule included, so a
// flood of delayed work cannot bypass backpressure. The idempotency record
// has no expiry until its task ends (see QueueConfig.IdempotencyTTL).
//
// Concurrent Submits to one queue are coalesced into one script call (see
// batch.go) that handles them in arrival order, each with exactly the result it
// would get alone; the times of the task (created_at, the record's updated_at)
// are those of the batch's script call.
//
// When ctx carries a span, Submit runs in a dtq.submit span and the new task
// keeps that span's traceparent (TaskInfo.TraceParent), which the worker
// continues (package tracing).
func (b *Broker) Submit(ctx context.Context, q QueueRef, req SubmitRequest) (SubmitResult, error) {
	it, err := prepare(req)
	if err != nil {
		return SubmitResult{}, err
	}
	ctx, span := b.startSubmitSpan(ctx, q, it.req, it.chosenID == "1")
	it.trace = tracing.TraceParent(ctx)
	res, err := b.batchers(q).submit.do(ctx, it)
	if err != nil && CodeOf(err) == "" {
		err = fmt.Errorf("broker: submit to %s: %w", q, err)
	}
	endSubmitSpan(span, res, err)
	return res, err
}

// prepare validates req and builds its batch item (a random ID when it has none).
func prepare(req SubmitRequest) (submitItem, error) {
	if err := validate(req); err != nil {
		return submitItem{}, err
	}
	payload, err := compactPayload(req.Payload)
	if err != nil {
		return submitItem{}, err
	}
	meta, err := compactMetadata(req.Metadata)
	if err != nil {
		return submitItem{}, err
	}
	var fp string
	if req.IdempotencyKey != "" {
		if fp, err = fingerprint(req.Type, payload); err != nil {
			return submitItem{}, err
		}
	}
	chosenID := "1"
	if req.ID == "" {
		req.ID, chosenID = NewTaskID(), "0"
	}
	return submitItem{req: req, payload: payload, meta: meta, chosenID: chosenID, fp: fp}, nil
}

// SubmitMany submits reqs in order, each with exactly the result Submit would
// give it at that point (a later request with the key of an earlier one gets
// ErrIdempotencyInProgress naming it; the depth gate counts the ones admitted
// before it), in script calls of up to 128 requests. It returns one result
// and one error per request.
//
// When a script call fails (Redis unreachable, a refused command, ctx done),
// the batch stops there: SubmitMany looks up which tasks of that call exist
// (a script is not rolled back, and a lost answer may follow a full run) and
// answers them as submitted; the others of that call and every later request
// get ErrNotSubmitted wrapping the failure: nothing was written for them, so
// submitting them again, with or without a key, duplicates nothing. When the
// first call fails and none of its tasks is known to exist, it returns the
// failure alone, as Submit would (nothing known to be written; an
// unanswered lookup leaves the tasks' existence open, as a failed Submit
// does). QUEUE_NOT_FOUND is always returned alone.
//
// When ctx carries a span, the call runs in one dtq.submit span and each new
// task keeps that span's traceparent, as with Submit.
func (b *Broker) SubmitMany(ctx context.Context, q QueueRef, reqs []SubmitRequest) ([]SubmitResult, []error, error) {
	ctx, span := b.startBatchSpan(ctx, q, len(reqs))
	res, errs, err := b.submitMany(ctx, q, reqs, tracing.TraceParent(ctx))
	endBatchSpan(span, err)
	return res, errs, err
}

// submitMany is SubmitMany; each new task stores traceparent ("" none).
func (b *Broker) submitMany(ctx context.Context, q QueueRef, reqs []SubmitRequest, traceparent string) ([]SubmitResult, []error, error) {
	res := make([]SubmitResult, len(reqs))
	errs := make([]error, len(reqs))
	items := make([]submitItem, 0, min(len(reqs), maxBatch))
	pos := make([]int, 0, cap(items)) // request index of each item
	var failed error                  // the failure that stopped the batch
	calls := 0
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		calls++
		if err := ctx.Err(); err != nil { // not attempted
			if calls == 1 {
				return err
			}
			for _, p := range pos {
				errs[p] = notSubmitted(err)
			}
			failed = err
		} else if r, e, err := b.submitBatch(ctx, q, items); err != nil {
			if CodeOf(err) == CodeQueueNotFound {
				return err
			}
			err = fmt.Errorf("broker: submit to %s: %w", q, err)
			found := b.settle(ctx, q, items, pos, res, errs, err)
			if calls == 1 && found == 0 {
				return err
			}
			failed = err
		} else {
			for i, p := range pos {
				res[p], errs[p] = r[i], e[i]
			}
		}
		items, pos = items[:0], pos[:0]
		return nil
	}
	for i, req := range reqs {
		if failed != nil {
			errs[i] = notSubmitted(failed)
			continue
		}
		it, err := prepare(req)
		if err != nil {
			errs[i] = err
			continue
		}
		it.trace = traceparent
		items, pos = append(items, it), append(pos, i)
		if len(items) == maxBatch {
			if err := flush(); err != nil {
				return nil, nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, nil, err
	}
	return res, errs, nil
}

// settleTimeout bounds settle's lookup, which runs even when ctx is done.
const settleTimeout = 2 * time.Second

// settle answers the items of a failed script call: those whose task hash
// exists as submitted, the others as not submitted (ErrNotSubmitted wrapping
// cause). When the lookup fails too, every item gets cause itself: its task
// may exist. It returns the number found.
func (b *Broker) settle(ctx context.Context, q QueueRef, items []submitItem, pos []int, res []SubmitResult, errs []error, cause error) int {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	k := keysFor(q)
	hashes := make([]*redis.MapStringStringCmd, len(items))
	_, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, it := range items {
			hashes[i] = p.HGetAll(ctx, k.task(it.req.ID))
		}
		return nil
	})
	found := 0
	for i, p := range pos {
		switch {
		case err != nil:
			errs[p] = cause
		case len(hashes[i].Val()) > 0:
			res[p], found = SubmitResult{Task: taskFromHash(q, hashes[i].Val())}, found+1
		default:
			errs[p] = notSubmitted(cause)
		}
	}
	return found
}

func notSubmitted(cause error) error {
	return &Error{Code: CodeNotSubmitted, Err: cause,
		Message: "not submitted: the batch stopped at a failure of Redis; submitting this task again is safe"}
}

// submitItem is one Submit in a batch: the validated request, its compact
// payload and metadata, the W3C traceparent stored with the task ("" for
// none), and the request fingerprint of a keyed request ("" without a key).
type submitItem struct {
	req      SubmitRequest
	payload  []byte
	meta     []byte
	chosenID string
	trace    string
	fp       string
}

// submitBatch runs submitBatchScript for items and maps each item's reply.
func (b *Broker) submitBatch(ctx context.Context, q QueueRef, items []submitItem) ([]SubmitResult, []error, error) {
	k := keysFor(q)
	now, nowtxt := b.now()
	cfgKey := k.config() // also the record key of items without an idempotency key
	keys := make([]string, 0, 4+Bands+2*len(items))
	keys = append(append(keys, cfgKey, k.schedule()), k.streams()...)
	keys = append(keys, k.taskIndex())
	args := make([]any, 0, 3+submitItemArgs*len(items))
	args = append(args, k.prefix, now, nowtxt)
	notBefore := make([]int64, len(items))
	for i, it := range items {
		r := it.req
		idemKey := cfgKey
		if r.IdempotencyKey != "" {
			idemKey = k.idempotency(r.IdempotencyKey)
		}
		if nb := msOrZero(r.NotBefore); nb > now {
			notBefore[i] = nb
		}
		fromCR := "0"
		if r.FromTaskCR {
			fromCR = "1"
		}
		keys = append(keys, k.task(r.ID), idemKey)
		args = append(args, packItem(r.ID, r.IdempotencyKey, len(it.payload), r.Priority, r.MaxAttempts, r.Timeout.Milliseconds(),
			notBefore[i], msOrZero(r.ExpiresAt), it.chosenID, fromCR, r.Type, it.payload, it.meta, it.trace, r.FlowKey, it.fp))
	}
	sc, err := b.writer(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	v, err := submitBatchScript.Run(ctx, sc, k.guarded(keys...), args...).Slice()
	if err != nil {
		return nil, nil, err
	}
	if str(v[0]) == "notfound" {
		return nil, nil, &Error{Code: CodeQueueNotFound, Message: "queue " + q.String() + " not found"}
	}
	replies, _ := v[1].([]any)
	return itemReplies(replies, len(items), func(i int, v []any) (SubmitResult, error) {
		return submitReply(q, items[i], now, notBefore[i], v)
	})
}

// submitItemFields is the number of fields of a packed submit item (packItem).
const submitItemFields = 16

// packItem packs one item of submitBatchScript, its fields in the order the
// script unpacks them (see the script's ARGV).
func packItem(id, ikey string, size, prio, maxAttempts int, timeoutMS, notBefore, expires int64, chosen, fromCR, typ string,
	payload, meta []byte, trace, flowKey, fp string) []byte {
	n := func(v int64) []byte { return strconv.AppendInt(nil, v, 10) }
	//nolint:staticcheck // ST1023: [...] against the declared width: a missing or extra field does not compile
	var f [submitItemFields][]byte = [...][]byte{[]byte(id), []byte(ikey), n(int64(size)), n(int64(prio)), n(int64(maxAttempts)),
		n(timeoutMS), n(notBefore), n(expires), []byte(chosen), []byte(fromCR), []byte(typ), payload, meta, []byte(trace), []byte(flowKey),
		[]byte(fp)}
	return pack(nil, f[:]...)
}

// submitReply maps one item's reply of submitBatchScript (see itemReply).
func submitReply(q QueueRef, it submitItem, now, notBefore int64, v []any) (SubmitResult, error) {
	req := it.req
	switch str(v[0]) {
	case "new":
		maxAttempts, _ := strconv.Atoi(str(v[2]))
		timeout, _ := strconv.ParseInt(str(v[3]), 10, 64)
		created := time.UnixMilli(now).UTC()
		t := TaskInfo{
			ID: req.ID, Queue: q, Type: req.Type, Payload: it.payload, IdempotencyKey: req.IdempotencyKey,
			Priority: req.Priority, State: State(str(v[1])), MaxAttempts: maxAttempts, // Attempt 0: not started
			Timeout: time.Duration(timeout) * time.Millisecond, CreatedAt: created, AvailableAt: created, FlowKey: req.FlowKey,
		}
		if len(it.meta) > 0 {
			t.Metadata = it.meta
		}
		if notBefore > 0 {
			t.AvailableAt = time.UnixMilli(notBefore).UTC()
		}
		if !req.ExpiresAt.IsZero() {
			t.ExpiresAt = time.UnixMilli(req.ExpiresAt.UnixMilli()).UTC()
		}
		return SubmitResult{Task: t}, nil
	case "dup":
		return SubmitResult{Task: withResult(taskFromHash(q, hashMap(v[2])), v[3]), Duplicate: true,
			RequestMatches: requestMatches(v, 4)}, nil
	case "busy":
		id, matches := str(v[1]), requestMatches(v, 2)
		msg := fmt.Sprintf("a task with this idempotency key is in progress (task %s)", id)
		if matches != nil && !*matches {
			msg += ", submitted with a different type or payload"
		}
		return SubmitResult{}, &Error{Code: CodeIdempotencyInProgress, TaskID: id, RequestMatches: matches, Message: msg}
	case "mismatch":
		id := str(v[1])
		return SubmitResult{}, &Error{Code: CodeIdempotencyKeyMismatch, TaskID: id,
			Message: fmt.Sprintf("idempotency key %q belongs to task %s, submitted with a different type or payload", req.IdempotencyKey, id)}
	case "full":
		depth, _ := strconv.ParseInt(str(v[1]), 10, 64)
		limit, _ := strconv.ParseInt(str(v[2]), 10, 64)
		return SubmitResult{}, &Error{Code: CodeQueueFull, Depth: depth, Limit: limit,
			Message: fmt.Sprintf("queue %s is full (%d/%d)", q, depth, limit)}
	case "toolarge":
		limit, _ := strconv.ParseInt(str(v[1]), 10, 64)
		return SubmitResult{}, &Error{Code: CodePayloadTooLarge, Limit: limit,
			Message: fmt.Sprintf("payload is %d bytes, limit %d", len(it.payload), limit)}
	}
	return SubmitResult{}, fmt.Errorf("unexpected reply %v", v)
}

// requestMatches reads the match field v[i] of a "dup" or "busy" reply: "1"
// matched, "0" did not, "" or absent (a duplicate by ID) nothing to compare.
func requestMatches(v []any, i int) *bool {
	if i >= len(v) || str(v[i]) == "" {
		return nil
	}
	matched := str(v[i]) == "1"
	return &matched
}
