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
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// EventStream follows a queue's events (Server-Sent Events). When the
// connection drops (an API replica restarting, a network blip) it reconnects
// by itself and resumes after the last event it returned, so Next returns
// every event once, in order, without gaps.
type EventStream struct {
	q      *Queue
	opts   EventsOptions
	ctx    context.Context
	cancel context.CancelFunc

	body io.ReadCloser
	rd   *bufio.Reader
	last string // the last event ID (or start position) the server sent
}

// Reconnect backoff of an event stream.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

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
func (s *EventStream) LastEventID() string { return s.last }

// Close ends the stream.
func (s *EventStream) Close() error {
	s.cancel()
	if s.body != nil {
		return s.body.Close()
	}
	return nil
}

func (s *EventStream) connect() error {
	v := url.Values{}
	if s.opts.TaskID != "" {
		v.Set("task_id", s.opts.TaskID)
	}
	h := http.Header{}
	if s.last != "" {
		h.Set("Last-Event-ID", s.last)
	}
	resp, err := s.q.c.send( //nolint:bodyclose // the stream keeps the body; Close closes it
		s.ctx, http.MethodGet, s.q.path+"/events?"+v.Encode(), h, nil)
	if err != nil {
		return err
	}
	s.body, s.rd = resp.Body, bufio.NewReader(resp.Body)
	// The server starts with an "id:" line naming its start position: read
	// it now, so a reconnect before the first event resumes there.
	if err := s.readStart(); err != nil {
		_ = s.body.Close()
		s.body, s.rd = nil, nil
		return fmt.Errorf("client: events stream: %w", err)
	}
	return nil
}

// readStart reads the stream's first block, up to its blank line, and takes
// its id as the position.
func (s *EventStream) readStart() error {
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return nil
		}
		if id, ok := strings.CutPrefix(line, "id:"); ok {
			s.last = strings.TrimPrefix(id, " ")
		}
	}
}

// Next returns the next event, waiting for it. It reconnects as needed and
// returns an error only when the stream cannot go on: ctx ended or Close was
// called, or the API refused to resume (an *Error such as ErrUnauthorized).
func (s *EventStream) Next() (Event, error) {
	backoff := minBackoff
	for {
		if s.rd != nil {
			ev, err := s.read()
			var bad *badEventError
			if err == nil || errors.As(err, &bad) {
				return ev, err
			}
			_ = s.body.Close() // the connection broke: reconnect below
			s.body, s.rd = nil, nil
		}
		if err := s.ctx.Err(); err != nil {
			return Event{}, err
		}
		err := s.connect()
		if e, ok := asError(err); ok && e.StatusCode != http.StatusTooManyRequests && e.StatusCode < 500 {
			return Event{}, err
		}
		if err != nil {
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return Event{}, s.ctx.Err()
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
	}
}

// read parses the next event: "id:" and "data:" lines up to a blank line. An
// id without data (the server's start position) only moves LastEventID;
// comments (keep-alives) are skipped.
func (s *EventStream) read() (Event, error) {
	var id, data string
	hasID := false
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Event{}, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if hasID {
				s.last = id
			}
			if data == "" {
				hasID = false
				continue
			}
			var ev Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return Event{}, &badEventError{id: id, err: err}
			}
			return ev, nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			id, hasID = strings.TrimPrefix(strings.TrimPrefix(line, "id:"), " "), true
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
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
