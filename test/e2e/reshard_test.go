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

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest/rediscluster"
)

// TestResharding moves a busy Queue's slot to another master of the cluster
// stack, five keys at a time as redis-cli --cluster reshard does, while its
// Task CRs are created (a third of them delayed, so due tasks are promoted
// during the move) and its worker runs them. Every Task must end Succeeded
// with a completed, original idempotency record (docs/redis.md, "Resharding a
// cluster while queues work").
func TestResharding(t *testing.T) {
	e := cluster
	ns := e.namespace(t, "e2e-reshard")
	e.queue(t, ns, nil)
	ctx := t.Context()
	cc, ok := e.rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("the %s stack's client is a %T, not a cluster client", e.name, e.rdb)
	}
	slot, err := cc.ClusterKeySlot(ctx, broker.KeyPrefix(broker.QueueRef{Namespace: ns, Name: "q"})).Result()
	must(t, err)
	m, err := rediscluster.NewSlotMove(ctx, cc, int(slot))
	must(t, err)
	defer m.Close()

	const n = 150
	var tasks []*dtqv1alpha1.Task
	for i := range n {
		w := newTask(fmt.Sprintf("reshard-%03d", i), ns, "reshard", "echo", map[string]int{"i": i}).Key(fmt.Sprintf("reshard-%03d", i))
		if i%3 == 0 {
			w = w.Delay(2 * time.Second)
		}
		tasks = append(tasks, w.Obj())
	}
	created := make(chan error, 1)
	go func() { created <- e.create(tasks) }()
	time.Sleep(time.Second) // tasks queued, running and scheduled

	start := time.Now()
	must(t, m.Begin(ctx))
	must(t, m.Finish(ctx, 5, 20*time.Millisecond)) // in batches of 5 keys, paced, so the queue works while its slot moves
	t.Logf("slot %d moved in %v", slot, time.Since(start).Round(time.Millisecond))
	must(t, <-created)

	got := e.waitTerminal(t, ns, "reshard", n, 3*time.Minute)
	redelivered := 0
	for _, task := range got {
		st := task.Status
		if st.State != dtqv1alpha1.TaskSucceeded || st.Idempotency == nil ||
			st.Idempotency.State != dtqv1alpha1.IdempotencyCompleted || st.Idempotency.Duplicate {
			t.Errorf("want Succeeded with a completed, original idempotency record: %s", describe(task))
		}
		if st.Attempt > 1 {
			redelivered++ // a completion refused for longer than the worker retries it: delivered again, as after a crash
		}
	}
	t.Logf("%d Tasks Succeeded, %d of them on a later attempt", len(got), redelivered)
}
