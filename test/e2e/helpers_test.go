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
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// scenarioLabel marks a test's Tasks so it can list them.
const scenarioLabel = "e2e.dtq.dev/scenario"

// namespace creates a namespace for one scenario. Namespaces are never deleted:
// envtest runs no namespace controller to finish the deletion.
func (e *env) namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.stack.Client.Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}

// queue creates Queue <ns>/q and, at cleanup, deletes it and its worker
// Deployment (envtest runs no garbage collector for owner references). The
// Queue's finalizer must have removed its Redis keys by then; only its
// still-running workers' heartbeat records (which expire) may come back.
func (e *env) queue(t *testing.T, ns string, mutate func(*dtqv1alpha1.QueueSpec)) *dtqv1alpha1.Queue {
	t.Helper()
	q := &dtqv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: ns}}
	if mutate != nil {
		mutate(&q.Spec)
	}
	must(t, e.stack.Client.Create(t.Context(), q))
	e.deleteQueueAtCleanup(t, q)
	return q
}

// deleteQueueAtCleanup deletes Queue q, its Tasks and its worker Deployment
// when t ends, and fails t if any of its Redis keys (but its workers'
// heartbeat records) is left.
func (e *env) deleteQueueAtCleanup(t *testing.T, q *dtqv1alpha1.Queue) {
	t.Helper()
	ns := q.Namespace
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := e.stack.Client
		_ = c.DeleteAllOf(ctx, &dtqv1alpha1.Task{}, client.InNamespace(ns))
		_ = c.Delete(ctx, q)
		_ = poll(ctx, time.Minute, func() error {
			err := c.Get(ctx, client.ObjectKeyFromObject(q), &dtqv1alpha1.Queue{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("queue %s/%s still exists: %w", ns, q.Name, err)
		})
		_ = c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: q.Name + "-workers", Namespace: ns}})
		prefix := broker.KeyPrefix(broker.QueueRef{Namespace: ns, Name: q.Name})
		keys, err := e.keys(ctx, prefix+"*")
		if err != nil {
			t.Errorf("list the keys of %s/%s: %v", ns, q.Name, err)
		}
		for _, k := range keys {
			if rest := strings.TrimPrefix(k, prefix); rest != "workers" && !strings.HasPrefix(rest, "worker:") {
				t.Errorf("key %s left after the Queue was deleted", k)
			}
		}
	})
}

// keys lists the keys matching pattern on every master of e's Redis (KEYS
// on a cluster client asks one node only).
func (e *env) keys(ctx context.Context, pattern string) ([]string, error) {
	cc, ok := e.rdb.(*redis.ClusterClient)
	if !ok {
		return e.rdb.Keys(ctx, pattern).Result()
	}
	var mu sync.Mutex
	var out []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		ks, err := c.Keys(ctx, pattern).Result()
		mu.Lock()
		out = append(out, ks...)
		mu.Unlock()
		return err
	})
	return out, err
}

func dur(d time.Duration) dtqv1alpha1.Duration { return dtqv1alpha1.NewDuration(d) }

// newTask is a Task of a scenario on queue "q": newTask("t", ns, "dup", "echo", nil).Key("k").Obj().
func newTask(name, ns, scenario, typ string, payload any) *testutil.TaskWrapper {
	w := testutil.MakeTask(name, ns).Queue("q").Type(typ).Payload(payload)
	w.Labels = map[string]string{scenarioLabel: scenario}
	return w
}

// createAll creates tasks with a few concurrent clients.
func (e *env) createAll(t *testing.T, tasks []*dtqv1alpha1.Task) {
	t.Helper()
	must(t, e.create(tasks))
}

func (e *env) create(tasks []*dtqv1alpha1.Task) error {
	ch := make(chan *dtqv1alpha1.Task)
	errs := make(chan error, len(tasks))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for task := range ch {
				if err := e.stack.Client.Create(context.Background(), task); err != nil {
					errs <- fmt.Errorf("create task %s: %w", task.Name, err)
				}
			}
		})
	}
	for _, task := range tasks {
		ch <- task
	}
	close(ch)
	wg.Wait()
	close(errs)
	return <-errs // nil when the channel is empty
}

// listTasks lists a scenario's Tasks by name.
func (e *env) listTasks(ctx context.Context, ns, scenario string) (map[string]*dtqv1alpha1.Task, error) {
	var list dtqv1alpha1.TaskList
	if err := e.stack.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{scenarioLabel: scenario}); err != nil {
		return nil, err
	}
	out := make(map[string]*dtqv1alpha1.Task, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// waitTerminal waits until n Tasks of the scenario exist and are terminal,
// and returns them.
func (e *env) waitTerminal(t *testing.T, ns, scenario string, n int, timeout time.Duration) map[string]*dtqv1alpha1.Task {
	t.Helper()
	var got map[string]*dtqv1alpha1.Task
	err := poll(t.Context(), timeout, func() error {
		var err error
		if got, err = e.listTasks(t.Context(), ns, scenario); err != nil {
			return err
		}
		done := 0
		states := map[dtqv1alpha1.TaskState]int{}
		for _, task := range got {
			states[task.Status.State]++
			if task.Status.State.Finished() {
				done++
			}
		}
		if len(got) != n || done != n {
			return fmt.Errorf("%d tasks, %d terminal, want %d: states %v", len(got), done, n, states)
		}
		return nil
	})
	must(t, err)
	return got
}

// poll calls f until it succeeds or timeout passes; the error is f's last.
func poll(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// counter reads the counter handler's counter name of namespace ns (0 when it never ran).
func (e *env) counter(t *testing.T, ns, name string) int64 {
	t.Helper()
	v, err := e.rdb.Get(t.Context(), demo.CounterKey(ns, name)).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return v
}

// workerPods counts the running worker processes of Queue <ns>/q.
func (e *env) workerPods(ns string) int {
	n := 0
	for _, p := range e.stack.Pods() {
		if p.Namespace == ns && p.Deployment == "q-workers" && !p.Terminating {
			n++
		}
	}
	return n
}

func describe(task *dtqv1alpha1.Task) string {
	st := task.Status
	s := fmt.Sprintf("%s: state %s attempt %d", task.Name, st.State, st.Attempt)
	if st.Idempotency != nil {
		s += fmt.Sprintf(" idempotency %+v", *st.Idempotency)
	}
	if st.LastError != "" {
		s += " lastError " + strings.TrimSpace(st.LastError)
	}
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
