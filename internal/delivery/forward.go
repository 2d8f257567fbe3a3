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

package delivery

// The forwarder: a worker.Handler that POSTs each task to the app and maps
// the answer to the SDK's outcome (outcomeOf, pure and table-tested).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/dtq-dev/dtq/pkg/worker"
)

// Request and response headers of the contract (docs/http-handlers.md).
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderTaskID         = "Dtq-Task-Id"
	HeaderTaskType       = "Dtq-Task-Type"
	HeaderAttempt        = "Dtq-Attempt"
	HeaderMaxAttempts    = "Dtq-Max-Attempts"
	HeaderDeadline       = "Dtq-Deadline"
	HeaderNamespace      = "Dtq-Namespace"
	HeaderQueue          = "Dtq-Queue"
	HeaderFlowKey        = "Dtq-Flow-Key" // only when the task has a flow key
	HeaderToken          = "Dtq-Sidecar-Token"
	// HeaderVerdict in a response overrides the status code: "retry" (retry
	// with the queue's backoff) or "fail" (dead letter now).
	HeaderVerdict = "Dtq-Verdict"
)

const (
	// maxBody bounds what is read of a response (a result, or an error
	// message); the engine truncates stored results to the queue's limit.
	maxBody = 1 << 20
	// maxMessage bounds the error message taken from a failed response.
	maxMessage = 1024
	// notFoundRetry is how often a task answered 404 without a verdict is
	// sent again while the route stays missing.
	notFoundRetry = 2 * time.Second
)

// forwarder is the sidecar's worker.Handler.
type forwarder struct {
	cfg       Config
	client    *loopClient
	log       *slog.Logger
	gate      *gate
	ns, queue string

	mu       sync.Mutex
	requests map[string]*openRequest // by task ID
}

// openRequest is one task the forwarder holds (sending it, or waiting to),
// for the loopback API.
type openRequest struct {
	ctx      context.Context
	task     *worker.Task
	progress json.RawMessage
}

func newForwarder(cfg Config, log *slog.Logger) *forwarder {
	if log == nil {
		log = slog.Default()
	}
	u, _ := url.Parse(cfg.HandlerURL) // checked by Config.validate
	return &forwarder{
		cfg: cfg, log: log, requests: map[string]*openRequest{},
		client: newLoopClient(u.Host, u.RequestURI()),
		gate:   newGate(cfg, log),
	}
}

// ProcessTask sends t to the app until an answer decides its outcome. It
// sends the same attempt again later after a 404 without a verdict (the
// route is missing), a 429/503 whose Retry-After falls before the deadline,
// a refused connection, or a connection lost on a resend after a 404 (the
// app was not running the route a moment ago). Requests are cancelled with
// ctx (the task's deadline, a cancel request, the drain or a lost lease). A
// task waiting to be sent (again) when the sidecar drains or its deadline
// comes is handed back uncounted (worker.ErrHandBack): the app never ran it.
func (f *forwarder) ProcessTask(ctx context.Context, t *worker.Task) (any, error) {
	f.track(ctx, t)
	defer f.untrack(t.ID)
	notFound := false // the last answer was a 404 without a verdict
	for {
		if f.gate.draining() {
			return nil, worker.ErrHandBack
		}
		if err := f.gate.waitThrottle(ctx); err != nil {
			return nil, unsent("the app asked to wait (Retry-After)", err)
		}
		a := f.send(ctx, t)
		if errors.Is(a.err, errHeaderValue) {
			return nil, &permanent{msg: "the task cannot be delivered over HTTP: " + a.err.Error()}
		}
		if a.err != nil && ctx.Err() == nil {
			// The app is down or restarting: read nothing more until it is
			// ready again. A refused connection delivered nothing, and a
			// resend right after a 404 went to a route missing a moment ago:
			// the same attempt is sent again then (notFound is cleared, so a
			// second loss in a row counts). Otherwise a connection lost
			// mid-request costs the attempt.
			f.gate.appGone(a.err)
			if isRefused(a.err) || notFound {
				notFound = false
				if err := f.gate.waitReady(ctx); err != nil {
					return nil, unsent("the app was not ready again after "+a.err.Error(), err)
				}
				continue
			}
		}
		o := outcomeOf(a, time.Now(), t.Deadline)
		if a.err == nil && !o.notFound {
			f.gate.answered()
		}
		switch {
		case o.again > 0:
			f.gate.throttle(time.Now().Add(o.again))
			continue
		case o.notFound:
			notFound = true
			f.gate.notFound(true)
			err := f.gate.sleep(ctx, notFoundRetry)
			f.gate.notFound(false)
			if err != nil {
				return nil, unsent("the app answered 404 (route "+f.cfg.HandlerURL+" missing?)", err)
			}
			continue
		}
		return o.result, o.err
	}
}

// unsent is the error of a task whose wait to be sent ended with err (the
// cause of ctx's end, from gate.sleep): at the task's deadline, as at the
// drain, it wraps worker.ErrHandBack, so the SDK hands the task back
// uncounted (the gate holds reads, so another pod, or this one later, reads
// it); a cancel or a lost lease keeps its cause.
func unsent(why string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		err = worker.ErrHandBack
	}
	return fmt.Errorf("%s: %w", why, err)
}

// answer is what one request got: a status, headers and body, or an error.
type answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (f *forwarder) send(ctx context.Context, t *worker.Task) answer {
	body := []byte(t.Payload)
	if len(body) == 0 {
		body = []byte("{}")
	}
	hs := make([]header, 0, 12)
	if t.IdempotencyKey != "" {
		hs = append(hs, header{HeaderIdempotencyKey, t.IdempotencyKey})
	}
	if k := t.FlowKey(); k != "" {
		hs = append(hs, header{HeaderFlowKey, k})
	}
	hs = append(hs,
		header{HeaderTaskID, t.ID},
		header{HeaderTaskType, t.Type},
		header{HeaderAttempt, strconv.Itoa(t.Attempt)},
		header{HeaderMaxAttempts, strconv.Itoa(t.MaxAttempts)},
		header{HeaderDeadline, t.Deadline.UTC().Format(time.RFC3339Nano)},
		header{HeaderNamespace, f.ns},
		header{HeaderQueue, f.queue},
		header{HeaderToken, f.cfg.Token})
	propagation.TraceContext{}.Inject(ctx, (*headers)(&hs))
	return f.client.post(ctx, hs, body)
}

// headers carries trace context into a request's headers.
type headers []header

func (h *headers) Get(string) string { return "" }
func (h *headers) Keys() []string    { return nil }
func (h *headers) Set(k, v string)   { *h = append(*h, header{k, v}) }

// outcome is how one answer ends the attempt: a result or an error for the
// SDK, or a request to send again (after again, or while the route is
// missing).
type outcome struct {
	result   any
	err      error
	again    time.Duration
	notFound bool
}

// permanent is a failure the SDK dead-letters at once (errors.Is SkipRetry),
// with the app's message as the recorded error.
type permanent struct{ msg string }

func (e *permanent) Error() string        { return e.msg }
func (e *permanent) Is(target error) bool { return target == worker.SkipRetry }

// outcomeOf maps an answer received at now, for a task due at deadline, to
// its outcome (the table of docs/http-handlers.md).
func outcomeOf(a answer, now, deadline time.Time) outcome {
	if a.err != nil {
		// Refused, reset, or cancelled (the SDK tells a deadline from a
		// cancel by its context's cause).
		return outcome{err: a.err}
	}
	msg := fmt.Sprintf("HTTP %d from the handler", a.status)
	if m := message(a.body); m != "" {
		msg += ": " + m
	}
	switch strings.ToLower(strings.TrimSpace(a.header.Get(HeaderVerdict))) {
	case "retry":
		return outcome{err: worker.Retryable(errors.New(msg + " (verdict retry)"))}
	case "fail":
		return outcome{err: &permanent{msg: msg + " (verdict fail)"}}
	}
	switch s := a.status; {
	case s >= 200 && s < 300:
		return success(a.body)
	case s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable:
		if d, ok := retryAfter(a.header.Get("Retry-After"), now); ok && now.Add(d).Before(deadline) {
			return outcome{again: max(d, time.Millisecond)}
		}
		return outcome{err: worker.Retryable(errors.New(msg))}
	case s == http.StatusNotFound:
		return outcome{notFound: true}
	case s >= 400 && s < 500:
		return outcome{err: &permanent{msg: msg}}
	}
	return outcome{err: worker.Retryable(errors.New(msg))}
}

// success is a 2xx answer's result: its JSON body, none when empty.
func success(body []byte) outcome {
	if len(bytes.TrimSpace(body)) == 0 {
		return outcome{}
	}
	if len(body) > maxBody {
		return outcome{err: &permanent{msg: fmt.Sprintf("the handler's result is larger than %d bytes", maxBody)}}
	}
	if !json.Valid(body) {
		return outcome{err: &permanent{msg: "the handler's 2xx body is not JSON"}}
	}
	return outcome{result: json.RawMessage(body)}
}

// message is a failed answer's error text: a JSON body's "error" or
// "message" string, else the body, trimmed and bounded.
func message(body []byte) string {
	var m struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	s := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &m) == nil {
		if m.Error != "" {
			s = m.Error
		} else if m.Message != "" {
			s = m.Message
		}
	}
	if len(s) > maxMessage {
		s = s[:maxMessage] + "..."
	}
	return s
}

// retryAfter parses a Retry-After value (seconds or an HTTP date). Seconds
// beyond what a time.Duration holds (292 years) are capped there: past any
// deadline.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(min(n, math.MaxInt64/int64(time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
}

func isRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func (f *forwarder) track(ctx context.Context, t *worker.Task) {
	f.mu.Lock()
	f.requests[t.ID] = &openRequest{ctx: ctx, task: t}
	f.mu.Unlock()
}

func (f *forwarder) untrack(id string) {
	f.mu.Lock()
	delete(f.requests, id)
	f.mu.Unlock()
}

// lookup returns the open request of task id, nil when none.
func (f *forwarder) lookup(id string) *openRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[id]
}
