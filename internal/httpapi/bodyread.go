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
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/dtq-dev/dtq/pkg/client"
)

// Request bodies are bounded in size (MaxBodyBytes, MaxBatchBodyBytes), in
// time and in number, as kube-apiserver bounds them, so a client sending
// slowly holds little memory and cannot starve others:
//   - every request with a body must deliver it within BodyTimeout: the
//     connection's read deadline, cleared once the body is read. It starts
//     when the headers arrive (withBodyDeadline, for every path, so a body
//     nobody reads is bounded too) and again once the request is authorized
//     (startBodyDeadline), so the time TokenReview and SubjectAccessReview
//     take is not counted against the client;
//   - a declared Content-Length over the limit is 413 PAYLOAD_TOO_LARGE at
//     once, before a byte of the body is read;
//   - the body is read into a buffer that grows with the bytes that arrive,
//     not one of the declared Content-Length;
//   - each client identity (the authenticated user, else the remote address)
//     reads at most MaxBodyReadsPerClient bodies at once (bodySlots); a
//     further request waits for a slot until its body deadline, then gets
//     429 TOO_MANY_REQUESTS.

// initialBodyBuffer is the most readBody allocates before bytes arrive.
const initialBodyBuffer = 16 << 10

type bodyDeadlineKey struct{}

// withBodyDeadline sets the connection's read deadline for a request that
// has a body (a request without one keeps none: the server reads its
// connection in the background while the handler runs, and a deadline there
// would cancel a long answer such as the events stream).
func (s *Server) withBodyDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, s.startBodyDeadline(w, r))
	})
}

// startBodyDeadline gives r's body, if it has one, BodyTimeout from now.
func (s *Server) startBodyDeadline(w http.ResponseWriter, r *http.Request) *http.Request {
	if r.Body == nil || r.Body == http.NoBody {
		return r
	}
	deadline := time.Now().Add(s.opts.BodyTimeout)
	_ = http.NewResponseController(w).SetReadDeadline(deadline)
	return r.WithContext(context.WithValue(r.Context(), bodyDeadlineKey{}, deadline))
}

type identityKey struct{}

// withIdentity records who sends r, for bodySlots and streamSlots: user, or
// the remote address when there is none (auth off).
func withIdentity(r *http.Request, user string) *http.Request {
	if user == "" {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		user = "addr:" + host
	}
	return r.WithContext(context.WithValue(r.Context(), identityKey{}, user))
}

// readBody reads r's body, at most limit bytes, holding one of its
// identity's slots.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		w.Header().Set("Connection", "close") // its body is not read
		return nil, tooLarge(limit)
	}
	ctx := r.Context()
	if deadline, ok := ctx.Value(bodyDeadlineKey{}).(time.Time); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	id, _ := r.Context().Value(identityKey{}).(string)
	release, err := s.bodySlots.acquire(ctx, id)
	if err != nil {
		w.Header().Set("Connection", "close") // its body is not read, nor waited for
		return nil, &client.Error{StatusCode: http.StatusTooManyRequests, Code: client.CodeTooManyRequests, RetryAfter: time.Second,
			Message: "too many request bodies of this client are being read at once; retry",
			Details: map[string]any{"retry_after_s": 1, "limit": s.opts.MaxBodyReadsPerClient}}
	}
	defer release()
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(min(r.ContentLength, limit, initialBodyBuffer)))
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit)); err != nil {
		// The rest of the body is not waited for (net/http would read it
		// before answering, under the deadline): the connection closes.
		w.Header().Set("Connection", "close")
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, &client.Error{StatusCode: http.StatusRequestTimeout, Code: client.CodeRequestTimeout,
				Message: "the request body did not arrive in time", Details: map[string]any{}}
		}
		return nil, err
	}
	// What follows the body is not bounded by its deadline.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return buf.Bytes(), nil
}

// clientSlots bounds what each identity does at once: its body reads
// (Server.bodySlots) or its events streams (Server.streamSlots).
type clientSlots struct {
	max int
	mu  sync.Mutex
	m   map[string]*slots
}

type slots struct {
	sem   chan struct{}
	users int // requests holding or waiting for a slot; the entry goes at 0
}

func newClientSlots(max int) *clientSlots { return &clientSlots{max: max, m: map[string]*slots{}} }

// acquire takes one of id's slots, waiting until ctx is done.
func (b *clientSlots) acquire(ctx context.Context, id string) (release func(), err error) {
	s, leave := b.join(id)
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// tryAcquire takes one of id's slots if one is free.
func (b *clientSlots) tryAcquire(id string) (release func(), ok bool) {
	s, leave := b.join(id)
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem; leave() }, true
	default:
		leave()
		return nil, false
	}
}

// join counts a user of id's slots until leave.
func (b *clientSlots) join(id string) (s *slots, leave func()) {
	b.mu.Lock()
	s = b.m[id]
	if s == nil {
		s = &slots{sem: make(chan struct{}, b.max)}
		b.m[id] = s
	}
	s.users++
	b.mu.Unlock()
	return s, func() {
		b.mu.Lock()
		if s.users--; s.users == 0 {
			delete(b.m, id)
		}
		b.mu.Unlock()
	}
}
