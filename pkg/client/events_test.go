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

package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/client"
)

// sseServer answers every events request with body (after the start
// position "id: 1-0") and counts the connections.
func sseServer(t *testing.T, body string, hold bool) (*client.Queue, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conns.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: 1-0\n\n"+body)
		w.(http.Flusher).Flush()
		if hold {
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c.Queue("ns", "q"), &conns
}

// Close from another goroutine (kubectl dtq's --timeout timer) while Next
// waits or reconnects: no data race (make test runs pkg/... with -race),
// and Next returns context.Canceled.
func TestEventStreamCloseWhileNext(t *testing.T) {
	for name, hold := range map[string]bool{"waiting": true, "reconnecting": false} {
		t.Run(name, func(t *testing.T) {
			q, conns := sseServer(t, "", hold)
			s, err := q.Events(t.Context(), client.EventsOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for range 20 {
				timer := time.AfterFunc(time.Duration(conns.Load()%3)*time.Millisecond, func() { _ = s.Close() })
				_, err = s.Next()
				timer.Stop()
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Next after Close: %v, want context.Canceled", err)
				}
				_ = s.LastEventID()
				if s, err = q.Events(t.Context(), client.EventsOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			_ = s.Close()
		})
	}
}

// The data lines of one event are joined with newlines (a JSON event split
// over lines still decodes), and a line over 64 KiB ends the stream with
// ErrSSELineTooLong rather than growing a buffer without bound.
func TestEventStreamParsing(t *testing.T) {
	q, _ := sseServer(t, "id: 2-0:0\ndata: {\"type\":\ndata: \"TaskQueued\",\ndata: \"task_id\": \"t1\"}\n\n", true)
	s, err := q.Events(t.Context(), client.EventsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev, err := s.Next()
	if err != nil || ev.Type != client.EventQueued || ev.TaskID != "t1" || s.LastEventID() != "2-0:0" {
		t.Fatalf("Next: %+v %v (last %s), want TaskQueued of t1 at 2-0:0", ev, err, s.LastEventID())
	}

	long := make([]byte, 70<<10)
	for i := range long {
		long[i] = 'x'
	}
	q, conns := sseServer(t, "data: "+string(long)+"\n\n", true)
	s2, err := q.Events(t.Context(), client.EventsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.Next(); !errors.Is(err, client.ErrSSELineTooLong) || conns.Load() != 1 {
		t.Fatalf("a 70 KiB line: %v after %d connections, want ErrSSELineTooLong after 1", err, conns.Load())
	}
}
