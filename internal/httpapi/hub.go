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
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redisconn"
)

// hubs share the reads of the events streams, as client-go's watch
// broadcaster shares one watch. Per watched queue one goroutine blocks on
// the queue's events stream (one Redis connection, however many clients
// watch), appends what it read to the queue's buffer and wakes every
// stream; each stream then takes what is new for it from the buffer, without
// a Redis read of its own. The buffer keeps the last hubBuffer events: a
// stream that falls further behind (a slow client), or that starts before
// the buffer (resuming from an old event ID), reads its backlog from Redis
// itself until it has caught up: a resync, not a gap, while Redis still
// keeps those entries. A hub stops once its last watcher has gone.
type hubs struct {
	b    *broker.Broker
	log  *slog.Logger
	done chan struct{} // closed by stop: every stream and hub ends

	mu   sync.Mutex
	m    map[broker.QueueRef]*hub
	once sync.Once
}

type hub struct {
	watchers int
	wake     chan struct{} // closed (and replaced) when the buffer grows

	// buf holds every event of the stream entries after base, up to the
	// last entry read, oldest first. base is "" until the hub has found
	// the stream's end. buf is only appended to or resliced, never written
	// in place, so a slice of it handed out stays valid.
	base string
	buf  []indexedEvent
}

// hubBlock is how long one blocking read waits; a hub whose watchers have
// gone stops within it.
const hubBlock = 5 * time.Second

// hubBuffer is how many events a hub keeps (a submit batch of 1000 tasks
// is one entry of 1000 events).
const hubBuffer = 4096

func newHubs(b *broker.Broker, log *slog.Logger) *hubs {
	return &hubs{b: b, log: log, done: make(chan struct{}), m: map[broker.QueueRef]*hub{}}
}

func (h *hubs) subscribe(q broker.QueueRef) *hub {
	h.mu.Lock()
	defer h.mu.Unlock()
	hb, ok := h.m[q]
	if !ok {
		hb = &hub{wake: make(chan struct{})}
		h.m[q] = hb
		go h.run(q, hb)
	}
	hb.watchers++
	return hb
}

func (h *hubs) unsubscribe(hb *hub) {
	h.mu.Lock()
	hb.watchers--
	h.mu.Unlock()
}

// since returns the wake channel the next growth of the buffer closes, and
// the buffered events after pos with the last entry the hub has read; ok is
// false when the buffer does not reach back to pos.
func (h *hubs) since(hb *hub, pos position) (wake <-chan struct{}, evs []indexedEvent, last string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	wake = hb.wake
	if hb.base == "" || entryLess(pos.entry, hb.base) || pos.index >= 0 && pos.entry == hb.base {
		return wake, nil, "", false
	}
	i := sort.Search(len(hb.buf), func(i int) bool {
		e := hb.buf[i]
		return entryLess(pos.entry, e.ID) || e.ID == pos.entry && pos.index >= 0 && e.index > pos.index
	})
	last = hb.base
	if n := len(hb.buf); n > 0 {
		last = hb.buf[n-1].ID
	}
	return wake, hb.buf[i:], last, true
}

// publish appends evs (whole entries after the last one read) to the buffer,
// trims it to hubBuffer events at an entry boundary, and wakes the streams.
func (h *hubs) publish(hb *hub, evs []broker.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range evs {
		ie := indexedEvent{Event: ev}
		if n := len(hb.buf); n > 0 && hb.buf[n-1].ID == ev.ID {
			ie.index = hb.buf[n-1].index + 1
		}
		hb.buf = append(hb.buf, ie)
	}
	if over := len(hb.buf) - hubBuffer; over > 0 {
		cut := over
		for cut < len(hb.buf) && hb.buf[cut].ID == hb.buf[cut-1].ID {
			cut++
		}
		hb.base = hb.buf[cut-1].ID
		hb.buf = append([]indexedEvent(nil), hb.buf[cut:]...)
	}
	close(hb.wake)
	hb.wake = make(chan struct{})
}

// reset starts the buffer afresh after base ("" until the stream's end is
// known again).
func (h *hubs) reset(hb *hub, base string) {
	h.mu.Lock()
	hb.base, hb.buf = base, nil
	h.mu.Unlock()
}

func (h *hubs) run(q broker.QueueRef, hb *hub) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-h.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	last := ""
	for {
		h.mu.Lock()
		if hb.watchers == 0 {
			delete(h.m, q)
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		var err error
		if last == "" {
			if _, last, err = h.b.EventBounds(ctx, q); err == nil {
				if last == "" {
					last = "0-0"
				}
				h.reset(hb, last)
			}
		}
		var evs []broker.Event
		if err == nil {
			evs, err = h.b.ReadEvents(ctx, q, last, eventsPage, hubBlock)
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			h.log.Info("Events hub read failed; retrying", "namespace", q.Namespace, "queue", q.Name, "error", err)
			last = "" // the stream may have been recreated
			h.reset(hb, "")
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return
			}
			continue
		}
		if len(evs) > 0 {
			last = evs[len(evs)-1].ID
			h.publish(hb, evs)
		}
	}
}

// stop ends every hub and stream.
func (h *hubs) stop() { h.once.Do(func() { close(h.done) }) }

// EventsRedis returns the Redis client for Options.Events, built from conn
// with a connection for each of up to queues watched queues (each hub holds
// one for its blocking read). A hub beyond that waits for a connection.
func EventsRedis(conn redisconn.Config, queues int) (redis.UniversalClient, error) {
	conn.PoolSize = queues
	return conn.Client()
}
