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

// The gate: whether the sidecar may read new tasks (worker.Config.Hold) and
// when this pod may send again after a Retry-After.

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dtq-dev/dtq/internal/wait"
	"github.com/dtq-dev/dtq/pkg/worker"
)

const (
	probeNotReady = 200 * time.Millisecond // readiness check period until the app is ready
	probeReady    = time.Second            // and after
	// notFoundHold is how long reads stay held after the last 404 without a
	// verdict, once no request waits on one.
	notFoundHold = 30 * time.Second
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
	notFoundOpen int       // requests waiting on a 404 without a verdict
	lastNotFound time.Time // zero after any other answer
	until        time.Time // no request before (Retry-After)
}

func newGate(cfg Config, log *slog.Logger) *gate {
	return &gate{cfg: cfg, log: log, client: &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}, drain: context.Background()}
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

// hold is worker.Config.Hold.
func (g *gate) hold() string {
	if !g.ready.Load() {
		return StatusAppNotReady
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.notFoundOpen > 0 || (!g.lastNotFound.IsZero() && time.Since(g.lastNotFound) < notFoundHold) {
		return StatusHandlerNotFound
	}
	return ""
}

// run checks the app's readiness until ctx ends.
func (g *gate) run(ctx context.Context) {
	for {
		ok := g.probe(ctx)
		if ctx.Err() != nil {
			return
		}
		if was := g.ready.Swap(ok); was != ok {
			if ok {
				g.log.Info("App ready; delivering")
			} else {
				g.log.Warn("App not ready; delivery held")
			}
		}
		d := probeReady
		if !ok {
			d = probeNotReady
		}
		if wait.Sleep(ctx, d) != nil {
			return
		}
	}
}

// probe is the app's readiness: its probe URL answering 2xx or 3xx (as the
// kubelet counts it), with the answer read so that the connection can be kept
// for the next probe, else a TCP connect to the handler's port.
func (g *gate) probe(ctx context.Context) bool {
	if g.cfg.ReadyURL != "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.cfg.ReadyURL, nil)
		if err != nil {
			return false
		}
		resp, err := g.client.Do(req)
		if err != nil {
			return false
		}
		// Read the body (as the kubelet does, up to 10 KiB), so the
		// connection is kept for the next probe: closing it unread resets it
		// under the app, which logs the reset (Python's http.server prints a
		// traceback), and every probe would open a new connection.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
		_ = resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 400
	}
	u, err := url.Parse(g.cfg.HandlerURL)
	if err != nil {
		return false
	}
	c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
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

// appGone holds reads after a refused connection until the app is ready again.
func (g *gate) appGone() {
	if g.ready.Swap(false) {
		g.log.Warn("The app refused or dropped a connection; delivery held until it is ready")
	}
}

// notFound counts a request waiting on a 404 without a verdict (open) or
// done waiting.
func (g *gate) notFound(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if open {
		if g.notFoundOpen == 0 && g.lastNotFound.IsZero() {
			g.log.Warn("The app answered 404 without a verdict; delivery held (is spec.handler.http.path right?)", "url", g.cfg.HandlerURL)
		}
		g.notFoundOpen++
		g.lastNotFound = time.Now()
	} else {
		g.notFoundOpen--
	}
}

// answered clears the 404 hold: the route answers.
func (g *gate) answered() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.lastNotFound.IsZero() {
		g.log.Info("The app's route answers again; delivering")
		g.lastNotFound = time.Time{}
	}
}

// throttle holds this pod's requests until t (a Retry-After).
func (g *gate) throttle(t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.After(g.until) {
		g.until = t
	}
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
