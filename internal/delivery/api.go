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

// The sidecar's loopback API for the app: progress, cancel state and the
// steps of worker.IdempotentOperation. Every request must carry the pod's
// secret (header Dtq-Sidecar-Token, sent with each task).

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/worker"
)

const (
	maxAPIBody      = 64 << 10
	defaultOpLease  = worker.DefaultOperationLease
	defaultOpTTL    = 24 * time.Hour
	maxOpLease      = 24 * time.Hour
	maxOpTTL        = 30 * 24 * time.Hour
	apiReadTimeout  = 10 * time.Second
	apiWriteTimeout = 30 * time.Second
)

type api struct {
	token string
	f     *forwarder
	rdb   redis.UniversalClient
	log   *slog.Logger
}

func newAPI(token string, f *forwarder, rdb redis.UniversalClient, log *slog.Logger) http.Handler {
	a := &api{token: token, f: f, rdb: rdb, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/tasks/{id}", a.task)
	mux.HandleFunc("POST /v1/tasks/{id}/progress", a.progress)
	mux.HandleFunc("POST /v1/operations/claim", a.claim)
	mux.HandleFunc("POST /v1/operations/renew", a.renew)
	mux.HandleFunc("POST /v1/operations/finish", a.finish)
	mux.HandleFunc("POST /v1/operations/release", a.release)
	return a.auth(mux)
}

// serveAPI listens on addr (loopback) and serves h until the returned stop.
func serveAPI(addr string, h http.Handler) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("sidecar API listener: %w (the port is the sidecar's: does the app container listen on it, or, with hostNetwork, another pod on the node?)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("sidecar API listener: %w", err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: apiReadTimeout, ReadTimeout: apiReadTimeout, WriteTimeout: apiWriteTimeout}
	go func() { _ = hs.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}, nil
}

// auth refuses a request without the pod's secret.
func (a *api) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(HeaderToken)), []byte(a.token)) != 1 {
			writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "missing or wrong "+HeaderToken+" (it comes with every task)")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxAPIBody)
		next.ServeHTTP(w, r)
	})
}

// taskState is the answer of GET /v1/tasks/{id}.
type taskState struct {
	// Cancelled: the task's cancel was requested; stop and return.
	Cancelled bool `json:"cancelled"`
	// Stopping: the request is being given up (cancel, deadline, drain or
	// lost lease): the sidecar no longer waits for its answer.
	Stopping bool            `json:"stopping"`
	Progress json.RawMessage `json:"progress,omitempty"`
}

func (a *api) task(w http.ResponseWriter, r *http.Request) {
	run := a.f.lookup(r.PathValue("id"))
	if run == nil {
		writeError(w, http.StatusNotFound, "NOT_RUNNING", "the task is not running on this pod")
		return
	}
	cause := context.Cause(run.ctx)
	a.f.mu.Lock()
	st := taskState{Cancelled: errors.Is(cause, worker.ErrCancelRequested), Stopping: cause != nil, Progress: run.progress}
	a.f.mu.Unlock()
	writeJSON(w, http.StatusOK, st)
}

// progress is the Go SDK's Task.ReportProgress for the app: the same checks,
// rate limit and fenced engine write.
func (a *api) progress(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	body, err := io.ReadAll(r.Body)
	if err != nil || !json.Valid(body) {
		writeError(w, http.StatusBadRequest, "INVALID_BODY", "the body must be JSON of at most 64 KiB")
		return
	}
	run := a.f.lookup(id)
	if run == nil {
		writeError(w, http.StatusNotFound, "NOT_RUNNING", "the task is not running on this pod")
		return
	}
	switch err := run.task.ReportProgress(r.Context(), json.RawMessage(body)); {
	case errors.Is(err, broker.ErrInvalidRequest):
		writeError(w, http.StatusBadRequest, "INVALID_PROGRESS", fmt.Sprintf("progress must be JSON of at most %d bytes compact", worker.MaxProgressBytes))
		return
	case errors.Is(err, worker.ErrLeaseLost):
		writeError(w, http.StatusConflict, "LEASE_LOST", "another worker runs the task now: stop")
		return
	case err != nil:
		a.redisError(w, err)
		return
	}
	a.f.mu.Lock()
	run.progress = body
	a.f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// opRequest is the body of the operation calls. Key is the caller's name,
// stored under the namespace's app key prefix (worker.Task.AppKey), so a Go
// handler's IdempotentOperation on t.AppKey(key) shares the record.
type opRequest struct {
	Key     string          `json:"key"`
	Token   string          `json:"token"`
	LeaseMs int64           `json:"leaseMs"`
	TTLMs   int64           `json:"ttlMs"`
	Result  json.RawMessage `json:"result"`
}

func (a *api) op(w http.ResponseWriter, r *http.Request, needToken bool) (opRequest, string, bool) {
	var req opRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_BODY", "the body must be a JSON object: "+err.Error())
		return req, "", false
	}
	if req.Key == "" || len(req.Key) > 512 {
		writeError(w, http.StatusBadRequest, "INVALID_KEY", "key is required (at most 512 bytes)")
		return req, "", false
	}
	if needToken && req.Token == "" {
		writeError(w, http.StatusBadRequest, "INVALID_TOKEN", "token (from the claim) is required")
		return req, "", false
	}
	if req.LeaseMs > maxOpLease.Milliseconds() {
		writeError(w, http.StatusBadRequest, "INVALID_LEASE", fmt.Sprintf("leaseMs must be at most %d (24 h); renew a longer side effect", maxOpLease.Milliseconds()))
		return req, "", false
	}
	if req.TTLMs > maxOpTTL.Milliseconds() {
		writeError(w, http.StatusBadRequest, "INVALID_TTL", fmt.Sprintf("ttlMs must be at most %d (30 days)", maxOpTTL.Milliseconds()))
		return req, "", false
	}
	return req, worker.AppKeyPrefix(a.f.ns) + req.Key, true
}

func (a *api) claim(w http.ResponseWriter, r *http.Request) {
	req, key, ok := a.op(w, r, false)
	if !ok {
		return
	}
	c, err := worker.ClaimOperation(r.Context(), a.rdb, key, msOr(req.LeaseMs, defaultOpLease))
	if err != nil {
		a.redisError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (a *api) renew(w http.ResponseWriter, r *http.Request) {
	req, key, ok := a.op(w, r, true)
	if !ok {
		return
	}
	held, err := worker.RenewOperation(r.Context(), a.rdb, key, req.Token, msOr(req.LeaseMs, defaultOpLease))
	if err != nil {
		a.redisError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"held": held})
}

func (a *api) finish(w http.ResponseWriter, r *http.Request) {
	req, key, ok := a.op(w, r, true)
	if !ok {
		return
	}
	if len(req.Result) > 0 && !json.Valid(req.Result) {
		writeError(w, http.StatusBadRequest, "INVALID_RESULT", "result must be JSON")
		return
	}
	// The side effect has run: record it even if the app hangs up now.
	res, err := worker.FinishOperation(context.WithoutCancel(r.Context()), a.rdb, key, req.Token, req.Result, msOr(req.TTLMs, defaultOpTTL))
	if err != nil {
		a.redisError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]json.RawMessage{"result": res})
}

func (a *api) release(w http.ResponseWriter, r *http.Request) {
	req, key, ok := a.op(w, r, true)
	if !ok {
		return
	}
	if err := worker.ReleaseOperation(r.Context(), a.rdb, key, req.Token); err != nil {
		a.redisError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) redisError(w http.ResponseWriter, err error) {
	a.log.Warn("Sidecar API", "error", err)
	writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "Redis is unavailable; retry")
}

// msOr is ms milliseconds (bounded by op), def when not positive.
func msOr(ms int64, def time.Duration) time.Duration {
	if ms <= 0 {
		return def
	}
	return time.Duration(ms) * time.Millisecond
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes {"code", "message"}: the dtq API's error body
// (internal/httpapi) without details and request_id. The loopback API has one
// caller, the pod's app, and no request IDs to correlate, and the worker
// binary does not link the API server's packages for two fields.
func writeError(w http.ResponseWriter, code int, reason, msg string) {
	writeJSON(w, code, map[string]string{"code": reason, "message": msg})
}
