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

package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

// A worker that cannot heartbeat for a visibility timeout (Redis hangs:
// SIGSTOP) cancels its handler, since a peer may already run the reclaimed
// entry, and records nothing for it. When Redis answers again the entry is
// reclaimed and the task succeeds as attempt 2.
func TestLeaseLostCancelsHandler(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	started := make(chan int, 4)
	cause := make(chan error, 1)
	mux := worker.NewMux()
	mux.HandleFunc("hang", func(ctx context.Context, t *worker.Task) (any, error) {
		started <- t.Attempt
		if t.Attempt > 1 {
			return "second", nil
		}
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	h := workertest.StartServer(t, rdb, mux, workertest.Options{VisibilityTimeout: time.Second, HeartbeatInterval: 200 * time.Millisecond})
	id := h.Submit("hang", nil, workertest.SubmitOptions{MaxAttempts: 3})
	select {
	case <-started:
	case <-time.After(waitFor):
		t.Fatal("handler did not start")
	}
	srv.Pause()
	select {
	case c := <-cause:
		if c == nil || !strings.Contains(c.Error(), "lease lost") {
			t.Fatalf("handler stopped with cause %v, want the lost lease", c)
		}
	case <-time.After(10 * time.Second):
		srv.Resume()
		t.Fatal("handler not cancelled 10s after Redis stopped answering (visibility timeout 1s)")
	}
	srv.Resume()
	st := h.Wait(id, waitFor)
	if st.State != "Succeeded" || st.Attempt != 2 || string(st.Result) != `"second"` {
		t.Fatalf("state %s attempt %d result %s err %q, want Succeeded by attempt 2", st.State, st.Attempt, st.Result, st.LastError)
	}
}
