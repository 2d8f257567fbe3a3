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

// The gate: whether the sidecar may read new tasks (worker.Config.Hold), why
// not (logged), and when this pod may send again after a Retry-After.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dtq-dev/dtq/pkg/wait"
	"github.com/dtq-dev/dtq/pkg/worker"
)

const (
	probeNotReady = 200 * time.Millisecond // readiness check period until the app is ready
	probeReady    = time.Second            // and after
	// notFoundHold is how long reads stay held after the last 404 without a
	// verdict, once no request waits on one.
	notFoundHold = 30 * time.Second
	// holdLogEvery is how often the log repeats why delivery is held while
	// the reason stays the same; a new reason is logged at once.
	holdLogEvery = 30 * time.Second
)

type gate struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client
	ready  atomic.Bool
	// drain ends when the sidecar begins to drain: a task still waiting to
	// be sent is then handed back (worker.ErrHandBack).
	drain context.Context

	mu           sync.Mutex
	notReady     string               // why the app is not ready: its failed check, or the connection it refused or lost
	notFoundOpen int                  // requests waiting on a 404 without a verdict
	lastNotFound time.Time            // zero after any other answer
	until        time.Time            // no request before (Retry-After)
	reported     string               // the state of the last report (status and why)
	logged       map[string]time.Time // when each state was last logged, within holdLogEvery
}

func newGate(cfg Config, log *slog.Logger) *gate {
	// A redirect is not followed: the answer is a 3xx, which counts as ready.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &gate{cfg: cfg, log: log, drain: context.Background(), logged: map[string]time.Time{},
		client: &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}, CheckRedirect: noRedirect}}
}

// draining reports whether the sidecar has begun to drain (Done, not Err:
// no lock on the request path).
func (g *gate) draining() bool {
	select {
	case <-g.drain.Done():
		return true
	default:
		return false
	}
}

// sleep is wait.Sleep for a task waiting to be sent: it also ends, with
// worker.ErrHandBack, when the sidecar begins to drain, so the task goes back
// to its queue at once, uncounted (it never reached the app). Otherwise it
// returns the cause of ctx's end (a cancel request, the deadline).
func (g *gate) sleep(ctx context.Context, d time.Duration) error {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(g.drain, func() { cancel(worker.ErrHandBack) })()
	if wait.Sleep(wctx, d) != nil {
		return context.Cause(wctx)
	}
	return nil
}

// holdStatus is worker.Config.Hold: the status under which reads are held,
// "" when they are not.
func (g *gate) holdStatus() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	status, _ := g.heldLocked(time.Now())
	return status
}

// heldLocked returns the status under which delivery is held at now and
// why, "" and "" when it is not; call with g.mu held.
func (g *gate) heldLocked(now time.Time) (status, why string) {
	switch {
	case !g.ready.Load():
		return StatusAppNotReady, g.notReady
	case g.notFoundOpen > 0 || (!g.lastNotFound.IsZero() && now.Sub(g.lastNotFound) < notFoundHold):
		return StatusHandlerNotFound, "the app answered 404 without a verdict to POST " + g.cfg.HandlerURL + " (is spec.handler.http.path or port right?)"
	case now.Before(g.until):
		return StatusThrottled, "the app answered 429 or 503 with Retry-After"
	}
	return "", ""
}

// report logs why delivery is held when the reason changes and every
// holdLogEvery while it lasts, and that delivery resumed; each state at most
// once per holdLogEvery, so a hold that comes and goes (an app answering
// Retry-After: 1 under load) logs two lines per holdLogEvery, not per change.
func (g *gate) report(now time.Time) {
	g.mu.Lock()
	status, why := g.heldLocked(now)
	state := status + ": " + why
	last, seen := g.logged[state]
	if (state == g.reported && status == "") || (seen && now.Sub(last) < holdLogEvery) {
		g.reported = state
		g.mu.Unlock()
		return
	}
	g.reported = state
	for k, at := range g.logged {
		if now.Sub(at) >= holdLogEvery {
			delete(g.logged, k)
		}
	}
	g.logged[state] = now
	until := g.until
	g.mu.Unlock()
	switch status {
	case "":
		g.log.Info("Delivering to the app", "url", g.cfg.HandlerURL)
	case StatusThrottled:
		g.log.Warn("Delivery held", "status", status, "why", why, "until", until.UTC().Format(time.RFC3339))
	default:
		g.log.Warn("Delivery held", "status", status, "why", why)
	}
}

// run checks the app's readiness and reports the hold until ctx ends.
func (g *gate) run(ctx context.Context) {
	for {
		ok, why := g.probe(ctx)
		if ctx.Err() != nil {
			return
		}
		g.mu.Lock()
		g.notReady = why
		g.mu.Unlock()
		g.ready.Store(ok)
		g.report(time.Now())
		d := probeReady
		if !ok {
			d = probeNotReady
		}
		if wait.Sleep(ctx, d) != nil {
			return
		}
	}
}

// probe is the app's readiness, and why not: its probe URL answering 2xx
// or 3xx (as the kubelet counts it; a redirect is not followed, so the check
// never leaves the pod), with the answer read so that the connection can be
// kept for the next probe, else a TCP connect to the handler's port.
func (g *gate) probe(ctx context.Context) (bool, string) {
	if g.cfg.ReadyURL != "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.cfg.ReadyURL, nil)
		if err != nil {
			return false, err.Error()
		}
		resp, err := g.client.Do(req)
		if err != nil {
			return false, "the readiness check failed: " + err.Error()
		}
		// Read the body (as the kubelet does, up to 10 KiB), so the
		// connection is kept for the next probe: closing it unread resets it
		// under the app, which logs the reset (Python's http.server prints a
		// traceback), and every probe would open a new connection.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
		_ = resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return false, fmt.Sprintf("the readiness check GET %s answered %d", g.cfg.ReadyURL, resp.StatusCode)
		}
		return true, ""
	}
	u, err := url.Parse(g.cfg.HandlerURL)
	if err != nil {
		return false, err.Error()
	}
	c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return false, "the app does not accept connections: " + err.Error()
	}
	_ = c.Close()
	return true, ""
}

// waitReady waits a probe period, then until the app is ready again.
func (g *gate) waitReady(ctx context.Context) error {
	if err := g.sleep(ctx, probeNotReady); err != nil {
		return err
	}
	for !g.ready.Load() {
		if err := g.sleep(ctx, probeNotReady/2); err != nil {
			return err
		}
	}
	return nil
}

// appGone holds reads after a connection to the app failed (refused, reset
// or closed mid-request) until a readiness check passes again.
func (g *gate) appGone(err error) {
	g.mu.Lock()
	g.notReady = "a connection to the app failed: " + err.Error()
	g.mu.Unlock()
	g.ready.Store(false)
	g.report(time.Now())
}

// notFound counts a request waiting on a 404 without a verdict (open) or
// done waiting.
func (g *gate) notFound(open bool) {
	g.mu.Lock()
	if open {
		g.notFoundOpen++
		g.lastNotFound = time.Now()
	} else {
		g.notFoundOpen--
	}
	g.mu.Unlock()
	if open {
		g.report(time.Now())
	}
}

// answered clears the 404 hold: the route gave another answer.
func (g *gate) answered() {
	g.mu.Lock()
	held := !g.lastNotFound.IsZero()
	g.lastNotFound = time.Time{}
	g.mu.Unlock()
	if held {
		g.report(time.Now())
	}
}

// throttle holds this pod's reads and requests until t (a Retry-After).
func (g *gate) throttle(t time.Time) {
	g.mu.Lock()
	if t.After(g.until) {
		g.until = t
	}
	g.mu.Unlock()
	g.report(time.Now())
}

// waitThrottle waits until the pod may send.
func (g *gate) waitThrottle(ctx context.Context) error {
	g.mu.Lock()
	d := time.Until(g.until)
	g.mu.Unlock()
	if d <= 0 {
		return nil
	}
	return g.sleep(ctx, d)
}
