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

package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/dtq-dev/dtq/pkg/client/internal/sse"
	"github.com/dtq-dev/dtq/pkg/wait"
)

// EventStream follows a queue's events (Server-Sent Events). When the
// stream ends (the server ends each after its maximum life, 30 minutes by
// default) or the connection drops (an API replica restarting, a network
// blip), it reconnects by itself, at once and then after a jittered
// exponential backoff (100 ms doubling to 5 s, ±20%) while that fails, and
// resumes after the last event it returned (or the position the server last
// named), so Next returns every event once, in order, without gaps. Next is for one goroutine at a time;
// Close and LastEventID may be called from any goroutine, also while Next
// waits.
type EventStream struct {
	q      *Queue
	opts   EventsOptions
	ctx    context.Context
	cancel context.CancelFunc

	sse *sse.Reader // nil while disconnected; only Next's goroutine uses it

	mu     sync.Mutex
	body   io.ReadCloser // the open response's body, closed by Close
	closed bool
	last   string // the last event ID (or start position) the server sent
}

// ErrSSELineTooLong ends an events stream whose server sent a line longer
// than 64 KiB or an event whose data is longer than 1 MiB.
var ErrSSELineTooLong = sse.ErrTooLong

// newReconnectBackoff is the reconnect delay of an events stream.
func newReconnectBackoff() *wait.Backoff {
	return &wait.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2}
}

// Events opens the queue's events stream. It returns once the server has
// answered, so every event after that moment is in the stream. ctx bounds
// the stream's life; Close ends it earlier.
func (q *Queue) Events(ctx context.Context, opts EventsOptions) (*EventStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &EventStream{q: q, opts: opts, ctx: ctx, cancel: cancel, last: opts.Since}
	if err := s.connect(); err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

// LastEventID is the ID after which the stream resumes: pass it as
// EventsOptions.Since to continue in another stream.
func (s *EventStream) LastEventID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func (s *EventStream) setLast(id string) {
	s.mu.Lock()
	s.last = id
	s.mu.Unlock()
}

// Close ends the stream; a Next waiting in another goroutine returns
// context.Canceled.
func (s *EventStream) Close() error {
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.body == nil {
		return nil
	}
	err := s.body.Close()
	s.body = nil
	return err
}

// disconnect closes the current connection, if Close has not.
func (s *EventStream) disconnect() {
	s.mu.Lock()
	if s.body != nil {
		_ = s.body.Close()
		s.body = nil
	}
	s.mu.Unlock()
	s.sse = nil
}

func (s *EventStream) connect() error {
	v := url.Values{}
	if s.opts.TaskID != "" {
		v.Set("task_id", s.opts.TaskID)
	}
	h := http.Header{}
	if last := s.LastEventID(); last != "" {
		h.Set("Last-Event-ID", last)
	}
	resp, err := s.q.c.send( //nolint:bodyclose // the stream keeps the body; Close closes it
		s.ctx, http.MethodGet, s.q.path+"/events?"+v.Encode(), h, nil)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = resp.Body.Close()
		return context.Canceled
	}
	s.body = resp.Body
	s.mu.Unlock()
	s.sse = sse.NewReader(resp.Body)
	// The server starts with an "id:" line naming its start position: read
	// it now, so a reconnect before the first event resumes there.
	b, err := s.sse.Next()
	if err != nil {
		s.disconnect()
		return fmt.Errorf("client: events stream: %w", err)
	}
	if b.HasID {
		s.setLast(b.ID)
	}
	return nil
}

// Next returns the next event, waiting for it. It reconnects as needed and
// returns an error only when the stream cannot go on: ctx ended or Close was
// called, the API refused to resume (an *Error such as ErrUnauthorized), or
// the server sent what is not an event (ErrSSELineTooLong, or data that is
// not an Event's JSON).
func (s *EventStream) Next() (Event, error) {
	bo := newReconnectBackoff()
	for {
		if s.sse != nil {
			ev, err := s.read()
			var bad *badEventError
			if err == nil || errors.As(err, &bad) || errors.Is(err, ErrSSELineTooLong) {
				return ev, err
			}
			s.disconnect() // the connection broke: reconnect below
		}
		if err := s.ctx.Err(); err != nil {
			return Event{}, err
		}
		err := s.connect()
		if e, ok := asError(err); ok && e.StatusCode != http.StatusTooManyRequests && e.StatusCode < 500 {
			return Event{}, err
		}
		if err != nil {
			if wait.Sleep(s.ctx, bo.Next()) != nil {
				return Event{}, s.ctx.Err()
			}
			continue
		}
		bo.Reset()
	}
}

// read returns the next event. A block with an id and no data (the
// server's start position) only moves LastEventID.
func (s *EventStream) read() (Event, error) {
	for {
		b, err := s.sse.Next()
		if err != nil {
			return Event{}, err
		}
		if b.HasID {
			s.setLast(b.ID)
		}
		if b.Data == "" {
			continue
		}
		var ev Event
		if err := json.Unmarshal([]byte(b.Data), &ev); err != nil {
			return Event{}, &badEventError{id: b.ID, err: err}
		}
		return ev, nil
	}
}

// badEventError is an event whose data is not an Event: the stream stops
// rather than reconnect to the same event again.
type badEventError struct {
	id  string
	err error
}

func (e *badEventError) Error() string { return fmt.Sprintf("client: event %q: %v", e.id, e.err) }
func (e *badEventError) Unwrap() error { return e.err }
