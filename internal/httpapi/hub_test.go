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

package httpapi_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/internal/httpapi"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/redisconn"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// eventReads counts the reads of events streams a redis-server has served
// (INFO commandstats: XREAD, XRANGE and XREVRANGE; nothing else reads them).
func eventReads(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(info, "\n") {
		name, rest, _ := strings.Cut(strings.TrimSpace(l), ":")
		if name != "cmdstat_xread" && name != "cmdstat_xrange" && name != "cmdstat_xrevrange" {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		c, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", l, err)
		}
		n += c
	}
	return n
}

// startAPI serves the API without auth on rs, with the events client
// cmd/api builds, and ensures the queues.
func startAPI(t *testing.T, rs *redistest.Server, reg *prometheus.Registry, watched int, queues ...broker.QueueRef) (*client.Client, *redis.Client) {
	t.Helper()
	rdb := rs.Client()
	b := broker.New(rdb)
	for _, q := range queues {
		if err := b.EnsureQueue(t.Context(), q, broker.DefaultQueueConfig()); err != nil {
			t.Fatal(err)
		}
	}
	events, err := httpapi.EventsRedis(redisconn.Config{URL: rs.URL()}, watched)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = events.Close() })
	s, err := httpapi.New(httpapi.Options{Broker: b, Events: broker.New(events), Auth: httpapi.NoAuth{}, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Cleanup(s.Stop)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c, events.(*redis.Client)
}

// 500 Waits on one queue share the hub's reads: opening each costs at most
// three reads of the events stream (its bounds, and one read before the hub
// has found the stream's end), and the wake that ends them all a handful,
// not a read (or two) per Wait as when each stream read for itself.
func TestWaitsShareOneEventRead(t *testing.T) {
	const waits = 500
	rs := redistest.Start(t)
	q := broker.QueueRef{Namespace: "ns", Name: "q"}
	reg := prometheus.NewRegistry()
	c, _ := startAPI(t, rs, reg, 8, q)
	queue := c.Queue(q.Namespace, q.Name)
	reqs := make([]client.SubmitRequest, waits)
	for i := range reqs {
		reqs[i] = client.SubmitRequest{TaskType: "echo"}
	}
	res, err := queue.SubmitBatch(t.Context(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	admin := rs.Client()
	before := eventReads(t, admin)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, waits)
	for _, r := range res {
		wg.Go(func() {
			task, err := queue.Wait(ctx, r.Task.TaskID)
			if err == nil && task.Status != client.StatusCancelled {
				err = fmt.Errorf("task %s ended %s", task.TaskID, task.Status)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	waitGauge(t, reg, "dtq_api_event_streams", waits)
	if _, err := queue.PurgeTasks(ctx); err != nil { // every task ends Cancelled: one stream entry per 500
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	reads := eventReads(t, admin) - before
	t.Logf("%d reads of the events stream for %d Waits", reads, waits)
	if budget := 3*waits + 10; reads > budget {
		t.Errorf("%d Waits cost %d reads of the events stream, budget %d (3 per Wait opened + 10)", waits, reads, budget)
	}
}

// waitGauge waits until the gauge name of reg reads want.
func waitGauge(t *testing.T, reg *prometheus.Registry, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := 0.0
		for _, mf := range mfs {
			if mf.GetName() == name {
				got = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %v, want %v", name, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Queues watched beyond go-redis's default pool (10 per CPU) do not wait
// for one another: each hub holds a connection of the events client for its
// blocking read, and EventsRedis sizes the pool for the watched queues, so
// no hub waits for a connection and every stream gets its queue's event.
func TestWatchedQueuesDoNotStarve(t *testing.T) {
	n := 10*runtime.GOMAXPROCS(0) + 10
	rs := redistest.Start(t)
	queues := make([]broker.QueueRef, n)
	for i := range queues {
		queues[i] = broker.QueueRef{Namespace: "ns", Name: fmt.Sprintf("q%d", i)}
	}
	reg := prometheus.NewRegistry()
	c, events := startAPI(t, rs, reg, n, queues...)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	streams := make([]*client.EventStream, n)
	for i, q := range queues {
		s, err := c.Queue(q.Namespace, q.Name).Events(ctx, client.EventsOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		streams[i] = s
	}
	waitGauge(t, reg, "dtq_api_event_streams", float64(n))
	for i, q := range queues {
		if _, err := c.Queue(q.Namespace, q.Name).Submit(ctx, "echo", nil); err != nil {
			t.Fatal(err)
		}
		ev, err := streams[i].Next()
		if err != nil || ev.Type != client.EventQueued {
			t.Fatalf("queue %s: event %+v, %v", q, ev, err)
		}
	}
	if st := events.PoolStats(); st.WaitCount != 0 || st.Timeouts != 0 {
		t.Errorf("hubs of %d queues waited %d times for a connection of the events client (%d timeouts)", n, st.WaitCount, st.Timeouts)
	}
}
