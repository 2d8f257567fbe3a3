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
	"sync"
	"time"

	"github.com/dtq-dev/dtq/internal/broker"
)

// hubs wake the events streams. Per watched queue one goroutine blocks on
// the queue's events stream (one Redis connection, however many clients
// watch) and, when it grows, closes the queue's wake channel; each stream
// then reads what is new for it with non-blocking reads from its own
// position. A hub stops once its last watcher has gone.
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
	wake     chan struct{} // closed (and replaced) when the stream grows
}

// hubBlock is how long one blocking read waits; a hub whose watchers have
// gone stops within it.
const hubBlock = 5 * time.Second

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

// wakeup returns the channel the next growth of the stream closes.
func (h *hubs) wakeup(hb *hub) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return hb.wake
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
			if _, last, err = h.b.EventBounds(ctx, q); err == nil && last == "" {
				last = "0-0"
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
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return
			}
			continue
		}
		if len(evs) > 0 {
			last = evs[len(evs)-1].ID
			h.mu.Lock()
			close(hb.wake)
			hb.wake = make(chan struct{})
			h.mu.Unlock()
		}
	}
}

// stop ends every hub and stream.
func (h *hubs) stop() { h.once.Do(func() { close(h.done) }) }
