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

// The forwarder's HTTP/1.1 client. Every request goes to one loopback
// address, so it needs none of net/http's Transport (proxies, TLS, HTTP/2,
// per-host pools, a reader and a writer goroutine per connection): the
// calling goroutine writes the request straight from the task into the
// connection's buffer and reads the answer with http.ReadResponse, and
// keep-alive connections wait in a LIFO list. That cut the sidecar's CPU per
// task by a quarter (docs/benchmarks.md, "Drain through the HTTP delivery
// sidecar").

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"
)

// idleTimeout closes a keep-alive connection idle this long, before the
// app's server does (Node's default keep-alive timeout is 5 s): a request
// written to a connection the app is closing would be lost after it was
// sent, costing the attempt.
const idleTimeout = 4 * time.Second

// errHeaderValue: a task field cannot be sent as an HTTP header value (a
// type or an idempotency key with a control character).
var errHeaderValue = errors.New("not a valid HTTP header value")

type loopClient struct {
	addr, host, path string // dial address, Host header, request target

	mu   sync.Mutex
	idle []*loopConn // most recently used last
}

type loopConn struct {
	net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	used time.Time
}

// header is one request header; values are checked before anything is
// written.
type header struct{ name, value string }

func newLoopClient(host, path string) *loopClient {
	return &loopClient{addr: host, host: host, path: path}
}

// post sends body with the headers and reads the answer (its body bounded
// by maxBody). A connection error, a cancelled ctx, an answer that asks to
// close or one that is not a 2xx leaves the connection closed; otherwise it
// is kept for the next request.
func (c *loopClient) post(ctx context.Context, hs []header, body []byte) answer {
	for _, h := range hs {
		if !httpguts.ValidHeaderFieldValue(h.value) {
			return answer{err: fmt.Errorf("header %s: %w", h.name, errHeaderValue)}
		}
	}
	cn, err := c.get(ctx)
	if err != nil {
		return answer{err: err}
	}
	// A cancelled ctx unblocks the write or read in progress; the
	// connection is not reused after that.
	stop := context.AfterFunc(ctx, func() { _ = cn.SetDeadline(time.Unix(1, 0)) })
	a, reuse := cn.roundTrip(c, hs, body)
	if !stop() || ctx.Err() != nil {
		reuse = false
		if a.err != nil {
			a.err = fmt.Errorf("%w (%w)", context.Cause(ctx), a.err)
		}
	}
	if reuse {
		c.put(cn)
	} else {
		_ = cn.Close()
	}
	if a.err != nil {
		// The app may have restarted: its other connections are dead too.
		c.closeIdle()
	}
	return a
}

func (cn *loopConn) roundTrip(c *loopClient, hs []header, body []byte) (answer, bool) {
	w := cn.bw
	// A bufio.Writer keeps its first error: Flush reports it.
	put := func(ss ...string) {
		for _, x := range ss {
			_, _ = w.WriteString(x)
		}
	}
	put("POST ", c.path, " HTTP/1.1\r\nHost: ", c.host, "\r\nContent-Type: application/json\r\nContent-Length: ", strconv.Itoa(len(body)), "\r\n")
	for _, h := range hs {
		put(h.name, ": ", h.value, "\r\n")
	}
	put("\r\n")
	_, _ = w.Write(body)
	if err := w.Flush(); err != nil {
		return answer{err: err}, false
	}
	for {
		resp, err := http.ReadResponse(cn.br, nil)
		if err != nil {
			return answer{err: err}, false
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			_ = resp.Body.Close() // an informational answer (no body) precedes the real one
			continue
		}
		var data []byte
		switch n := resp.ContentLength; {
		case n == 0:
		case n > 0 && n <= maxBody:
			data = make([]byte, n)
			_, err = io.ReadFull(resp.Body, data)
		default:
			data, err = io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
		}
		if err != nil {
			return answer{err: fmt.Errorf("read the app's answer: %w", err)}, false
		}
		a := answer{status: resp.StatusCode, header: resp.Header, body: data}
		if len(data) > maxBody {
			return a, false // not read to its end: the connection is closed, not drained
		}
		_ = resp.Body.Close()
		// Reused after a 2xx the app does not close: an app may answer an
		// error before it reads the request's body (Python's
		// BaseHTTPRequestHandler does), which would then prefix the next
		// request on this connection.
		return a, !resp.Close && a.status < 300
	}
}

// get returns an idle connection that is still open and holds nothing the
// app sent past its last answer, else dials one.
func (c *loopClient) get(ctx context.Context) (*loopConn, error) {
	for {
		c.mu.Lock()
		n := len(c.idle)
		if n == 0 {
			c.mu.Unlock()
			break
		}
		cn := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		if time.Since(cn.used) < idleTimeout && cn.br.Buffered() == 0 && open(cn.Conn) {
			return cn, nil
		}
		_ = cn.Close()
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, err
	}
	return &loopConn{Conn: nc, br: bufio.NewReader(nc), bw: bufio.NewWriter(nc)}, nil
}

func (c *loopClient) put(cn *loopConn) {
	cn.used = time.Now()
	c.mu.Lock()
	c.idle = append(c.idle, cn)
	c.mu.Unlock()
}

// closeIdle closes every idle connection.
func (c *loopClient) closeIdle() {
	c.mu.Lock()
	idle := c.idle
	c.idle = nil
	c.mu.Unlock()
	for _, cn := range idle {
		_ = cn.Close()
	}
}

// open reports whether the app has neither closed an idle connection nor
// written to it (one non-blocking peek), the check net/http's Transport
// makes with a reader goroutine per connection: a request is never written
// to a connection the app has already closed.
func open(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = errors.Is(err, syscall.EAGAIN)
		return true
	})
	return err == nil && alive
}
