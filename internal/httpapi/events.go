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

package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/wait"
)

// The events stream serves a queue's durable events stream (Redis) as
// Server-Sent Events. One stream entry may hold several events (a submit
// batch's TaskQueued lists its tasks), so an event's ID is "<entry>:<i>",
// its entry's ID and its index in the entry, and the stream resumes exactly
// after any event, on any replica, after any restart: Last-Event-ID (or
// ?since=) "<entry>:<i>" resumes after that event, "<entry>" after the whole
// entry, "0" from the oldest event kept; neither means from now. The first
// thing the server sends is an "id:" line naming where it starts, so a client
// that reconnects before its first event still resumes without a gap.
//
// A stream is bounded as kube-apiserver bounds a watch: each write must reach
// the client within twice the keep-alive interval (a client that stops
// reading ends its stream, goroutine and hub slot instead of holding them
// forever); a stream ends cleanly after MaxStreamLife ±10%, with an "id:"
// line naming where it stands, and the client resumes there with
// Last-Event-ID, on any replica (this spreads long streams over replicas
// after a rollout too); and each client identity has at most
// MaxStreamsPerClient streams open on a replica.

// position is where a stream stands: after event index of entry, or after
// the whole entry when index is -1.
type position struct {
	entry string
	index int
}

func (p position) String() string {
	if p.index < 0 {
		return p.entry
	}
	return p.entry + ":" + strconv.Itoa(p.index)
}

// parsePosition parses "0", "<ms>-<seq>" or "<ms>-<seq>:<index>".
func parsePosition(s string) (position, bool) {
	if s == "0" {
		return position{entry: "0-0", index: -1}, true
	}
	entry, idx, hasIdx := strings.Cut(s, ":")
	if _, _, ok := parseEntryID(entry); !ok {
		return position{}, false
	}
	p := position{entry: entry, index: -1}
	if hasIdx {
		n, err := strconv.Atoi(idx)
		if err != nil || n < 0 {
			return position{}, false
		}
		p.index = n
	}
	return p, true
}

// parseEntryID splits a stream entry ID "<ms>-<seq>".
func parseEntryID(id string) (ms, seq uint64, ok bool) {
	a, b, found := strings.Cut(id, "-")
	var err1, err2 error
	ms, err1 = strconv.ParseUint(a, 10, 64)
	seq, err2 = strconv.ParseUint(b, 10, 64)
	return ms, seq, found && err1 == nil && err2 == nil
}

// entryLess orders stream entry IDs.
func entryLess(a, b string) bool {
	am, as, _ := parseEntryID(a)
	bm, bs, _ := parseEntryID(b)
	return am < bm || am == bm && as < bs
}

// entryBefore returns the largest ID before id, so a read after it starts at id.
func entryBefore(id string) string {
	ms, seq, _ := parseEntryID(id)
	switch {
	case seq > 0:
		return fmt.Sprintf("%d-%d", ms, seq-1)
	case ms > 0:
		return fmt.Sprintf("%d-%d", ms-1, uint64(1<<64-1))
	}
	return "0-0"
}

// eventsPage is how many stream entries one read takes.
const eventsPage = 100

// events streams the queue's events: ?task_id= keeps only one task's.
func (s *Server) events(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	from := r.Header.Get("Last-Event-ID")
	name := "Last-Event-ID"
	if from == "" {
		from, name = r.URL.Query().Get("since"), "since"
	}
	var pos position
	if from != "" {
		var ok bool
		if pos, ok = parsePosition(from); !ok {
			s.writeError(w, r, invalidRequest(name, `%s must be "0", an event ID or a stream entry ID, not %q`, name, from))
			return
		}
	}
	who, _ := r.Context().Value(identityKey{}).(string)
	release, ok := s.streamSlots.tryAcquire(who)
	if !ok {
		s.writeError(w, r, &client.Error{StatusCode: http.StatusTooManyRequests, Code: client.CodeTooManyRequests, RetryAfter: 5 * time.Second,
			Message: "too many events streams of this client are open; close one or retry",
			Details: map[string]any{"retry_after_s": 5, "limit": s.opts.MaxStreamsPerClient}})
		return
	}
	defer release()
	pos, truncated, err := s.startPosition(r.Context(), q, from != "", pos)
	if err != nil {
		s.writeError(w, r, err)
		return
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
	// The connection closes with the stream: its write deadline must not
	// outlive it into a next request on the same connection.
	h.Set("Connection", "close")
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{w: w, rc: http.NewResponseController(w), timeout: 2 * s.opts.KeepAlive}
	_, _ = fmt.Fprintf(sw, "id: %s\n\n", pos) // a broken stream shows at the Flush below
	if truncated {
		_ = writeEvent(sw, "", client.Event{Type: client.EventsTruncated, Time: time.Now().UTC()})
	}
	if sw.Flush() != nil {
		return
	}
	s.follow(sw, r, q, pos, r.URL.Query().Get("task_id"))
}

// startPosition is where a stream starts: after pos when resuming, else
// after the newest entry. truncated says that entries after pos were trimmed
// (they may have held events, or none: the stream records no trimmed IDs), so
// the client is told it may have missed some.
func (s *Server) startPosition(ctx context.Context, q broker.QueueRef, resume bool, pos position) (_ position, truncated bool, _ error) {
	if err := s.queueExists(ctx, q); err != nil {
		return pos, false, err
	}
	oldest, newest, err := s.b.EventBounds(ctx, q)
	if err != nil {
		return pos, false, err
	}
	if resume {
		return pos, pos.entry != "0-0" && oldest != "" && entryLess(pos.entry, oldest), nil
	}
	if newest == "" {
		newest = "0-0"
	}
	return position{entry: newest, index: -1}, false, nil
}

// follow writes the events after pos (those of task only, when set) as the
// hub reads them, and a keep-alive when idle, until a write fails, the
// client goes, the server stops or the stream's life ends.
func (s *Server) follow(sw *streamWriter, r *http.Request, q broker.QueueRef, pos position, task string) {
	hb := s.hubs.subscribe(q)
	defer s.hubs.unsubscribe(hb)
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()
	tick := time.NewTicker(s.opts.KeepAlive)
	defer tick.Stop()
	end := time.NewTimer(wait.Jitter(s.opts.MaxStreamLife, 0.1))
	defer end.Stop()
	for {
		wake, sent, err := s.sendAfter(sw, r, q, hb, &pos, task)
		if err != nil {
			s.log.Debug("Events stream ended", "queue", q.String(), "error", err)
			return
		}
		if sent && sw.Flush() != nil {
			return
		}
		select {
		case <-wake:
		case <-tick.C:
			if _, err := io.WriteString(sw, ": keep-alive\n\n"); err != nil || sw.Flush() != nil {
				return
			}
		case <-end.C:
			// Where the stream stands, also past events task's filter left
			// out, so the client resumes there.
			_, _ = fmt.Fprintf(sw, "id: %s\n\n", pos)
			_ = sw.Flush()
			return
		case <-r.Context().Done():
			return
		case <-s.hubs.done:
			return
		}
	}
}

// streamWriter is an events stream's response: each write and flush must
// reach the client within timeout (the connection's write deadline, set
// before each), so a client that stops reading ends the stream, and one that
// reads slowly keeps it.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (sw *streamWriter) Write(p []byte) (int, error) {
	if err := sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout)); err != nil {
		return 0, err
	}
	return sw.w.Write(p)
}

func (sw *streamWriter) Flush() error {
	if err := sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout)); err != nil {
		return err
	}
	return sw.rc.Flush()
}

// sendAfter writes every event after pos (those of task only, when set) and
// moves pos to the last entry read; it reports whether it wrote any, and
// returns the channel the hub closes when it has more. The events come from
// the hub's buffer, or from Redis while the stream is behind the buffer.
func (s *Server) sendAfter(w io.Writer, r *http.Request, q broker.QueueRef, hb *hub, pos *position, task string) (<-chan struct{}, bool, error) {
	wake, evs, last, ok := s.hubs.since(hb, *pos)
	if !ok {
		sent, err := s.readAfter(w, r, q, pos, task)
		return wake, sent, err
	}
	sent, err := emitEvents(w, evs, task)
	if err == nil && !entryLess(last, pos.entry) {
		*pos = position{entry: last, index: -1}
	}
	return wake, sent, err
}

// readAfter is sendAfter reading from Redis.
func (s *Server) readAfter(w io.Writer, r *http.Request, q broker.QueueRef, pos *position, task string) (bool, error) {
	sent := false
	if pos.index >= 0 { // resume inside an entry: the rest of it first
		evs, err := s.b.ReadEvents(r.Context(), q, entryBefore(pos.entry), 1, 0)
		if err != nil {
			return sent, err
		}
		var rest []indexedEvent
		for _, ev := range indexed(evs) {
			if ev.ID == pos.entry && ev.index > pos.index {
				rest = append(rest, ev)
			}
		}
		if sent, err = emitEvents(w, rest, task); err != nil {
			return sent, err
		}
		pos.index = -1
	}
	for {
		evs, err := s.b.ReadEvents(r.Context(), q, pos.entry, eventsPage, 0)
		if err != nil || len(evs) == 0 {
			return sent, err
		}
		more, err := emitEvents(w, indexed(evs), task)
		sent = sent || more
		if err != nil {
			return sent, err
		}
		pos.entry = evs[len(evs)-1].ID
	}
}

// emitEvents writes evs (those of task only, when set); it reports whether
// it wrote any.
func emitEvents(w io.Writer, evs []indexedEvent, task string) (bool, error) {
	sent := false
	for _, ev := range evs {
		if task != "" && ev.TaskID != task {
			continue
		}
		id := position{entry: ev.ID, index: ev.index}.String()
		if err := writeEvent(w, id, client.Event{EventID: id, Type: client.EventType(ev.Type), TaskID: ev.TaskID,
			Attempt: ev.Attempt, Time: ev.At, Progress: ev.Progress}); err != nil {
			return sent, err
		}
		sent = true
	}
	return sent, nil
}

type indexedEvent struct {
	broker.Event
	index int
}

// indexed numbers each event within its stream entry (ReadEvents returns an
// entry's events together, in order).
func indexed(evs []broker.Event) []indexedEvent {
	out := make([]indexedEvent, len(evs))
	for i, ev := range evs {
		out[i] = indexedEvent{Event: ev}
		if i > 0 && evs[i-1].ID == ev.ID {
			out[i].index = out[i-1].index + 1
		}
	}
	return out
}

// writeEvent writes one SSE event; an empty id writes no id line.
func writeEvent(w io.Writer, id string, ev client.Event) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if id != "" {
		_, err = fmt.Fprintf(w, "id: %s\ndata: %s\n\n", id, data)
	} else {
		_, err = fmt.Fprintf(w, "data: %s\n\n", data)
	}
	return err
}
