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

package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

// A worker whose queue's layout record is raised beyond what it reads while
// it runs a task stops at its next heartbeat: it exits non-zero naming both
// layouts, and from the raise on writes nothing (the running task is neither
// completed nor handed back; a newer worker reclaims it).
func TestWorkerStopsWhenItsQueueLayoutIsRaised(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	o := options()
	o.HeartbeatInterval = 100 * time.Millisecond
	o.VisibilityTimeout = 10 * time.Second
	workertest.EnsureQueue(t, rdb, o)
	q := broker.QueueRef{Namespace: o.Namespace, Name: o.Queue}
	w := startWorker(t, srv, o, "worker-a")
	id := workertest.Submit(t, rdb, o, demo.Sleep, demo.SleepPayload{Seconds: 30}, workertest.SubmitOptions{})
	waitState(t, rdb, o, id, 20*time.Second, func(ti broker.TaskInfo) bool { return ti.State == broker.StateRunning })

	newer := broker.MaxLayout + 1
	rdb.HSet(ctx, broker.KeyPrefix(q)+"config", "layout", newer)
	changes := func() string {
		for _, l := range strings.Split(rdb.Info(ctx, "persistence").Val(), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "rdb_changes_since_last_save:"); ok {
				return v
			}
		}
		t.Fatal("no rdb_changes_since_last_save in INFO")
		return ""
	}
	before := changes()
	select {
	case <-w.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the worker still runs on a queue of a newer layout")
	}
	var ee *exec.ExitError
	if !errors.As(w.err, &ee) || ee.ExitCode() <= 0 {
		t.Errorf("exit: %v; want a non-zero exit code", w.err)
	}
	want := fmt.Sprintf("queue %s in Redis holds dtq layout %d; this binary reads layouts %d..%d", q, newer, broker.MinLayout, broker.MaxLayout)
	if !strings.Contains(w.out.String(), want) {
		t.Errorf("output does not say %q:\n%s", want, w.out.String())
	}
	if after := changes(); after != before {
		t.Errorf("the worker wrote to Redis after the raise (changes %s -> %s):\n%s", before, after, w.out.String())
	}
	if ti := getTask(t, rdb, o, id); ti.State != broker.StateRunning || ti.WorkerID != "worker-a" {
		t.Errorf("task %s %s on %s; want left Running on worker-a for a newer worker to reclaim", id, ti.State, ti.WorkerID)
	}
}
