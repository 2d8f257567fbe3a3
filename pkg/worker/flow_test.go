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
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

// Two servers on a flow-controlled queue whose keys run one task at a time
// across both: no key ever runs two tasks at once (from the handlers' own
// record), every task runs, and each handler sees its task's flow key.
func TestFlowControlAcrossServers(t *testing.T) {
	rdb := redistest.Start(t).Client()
	var mu sync.Mutex
	running, most := map[string]int{}, map[string]int{}
	mux := worker.NewMux()
	mux.HandleFunc("job", func(ctx context.Context, task *worker.Task) (any, error) {
		k := task.FlowKey()
		mu.Lock()
		running[k]++
		most[k] = max(most[k], running[k])
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		running[k]--
		mu.Unlock()
		return map[string]string{"key": k}, nil
	})
	o := workertest.Options{Concurrency: 4}
	h1 := workertest.StartServer(t, rdb, mux, o)
	o.Queue = h1.Queue()
	workertest.StartServer(t, rdb, mux, o)
	cfg := broker.DefaultQueueConfig()
	cfg.Flow = &broker.FlowControl{PerKey: broker.KeyLimits{Concurrency: 1}}
	if err := broker.New(rdb).EnsureQueue(context.Background(), qref(h1), cfg); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for i := range 40 {
		k := fmt.Sprintf("tenant-%d", i%4)
		keys[h1.Submit("job", nil, workertest.SubmitOptions{FlowKey: k})] = k
	}
	for id, k := range keys {
		st := h1.Wait(id, waitFor)
		var res struct{ Key string }
		if err := json.Unmarshal(st.Result, &res); st.State != "Succeeded" || err != nil || res.Key != k {
			t.Fatalf("task %s of %s: %s, result %s", id, k, st.State, st.Result)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for k, n := range most {
		if n != 1 {
			t.Errorf("key %s ran %d tasks at once, cap 1", k, n)
		}
	}
}
