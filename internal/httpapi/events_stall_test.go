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
	"fmt"
	"net"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// watchers is how many streams the hubs count.
func (s *Server) watchers() int {
	s.hubs.mu.Lock()
	defer s.hubs.mu.Unlock()
	n := 0
	for _, hb := range s.hubs.m {
		n += hb.watchers
	}
	return n
}

// smallBuffers accepts connections whose socket send buffer is small, so a
// client that stops reading blocks the server's writes after a few KiB.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		err = c.(*net.TCPConn).SetWriteBuffer(4096)
	}
	return c, err
}

// A client that opens an events stream and never reads (a stopped process:
// its TCP window stays at 0) no longer holds the stream: the write the
// stream blocks in fails at its deadline, twice the keep-alive interval, and
// the handler ends, so the hub's watcher count returns to 0 and the request
// is counted as done.
func TestStalledStreamEnds(t *testing.T) {
	rdb := redistest.Start(t).Client()
	b := broker.New(rdb)
	q := broker.QueueRef{Namespace: "ns", Name: "q"}
	if err := b.EnsureQueue(t.Context(), q, broker.DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	for range 4 { // about 700 KB of events, far beyond both sockets' buffers
		reqs := make([]broker.SubmitRequest, 1000)
		for i := range reqs {
			reqs[i] = broker.SubmitRequest{Type: "echo", Priority: 5}
		}
		if _, _, err := b.SubmitMany(t.Context(), q, reqs); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Options{Broker: b, Auth: NoAuth{}, KeepAlive: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s)
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(s.Stop)

	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.DialContext(t.Context(), "tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := fmt.Fprint(conn, "GET /api/v1/namespaces/ns/queues/q/events?since=0 HTTP/1.1\r\nHost: api\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	ended := func() float64 {
		var m dto.Metric
		_ = s.metrics.requests.WithLabelValues("events", "200").Write(&m)
		return m.GetCounter().GetValue()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for ended() == 0 || s.watchers() != 0 {
		if ctx.Err() != nil {
			t.Fatalf("5s after a client stopped reading, its stream still runs: %d hub watchers, %v streams ended", s.watchers(), ended())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
