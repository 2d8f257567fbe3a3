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
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redisconn"
)

// The dev stack runs the manager with per-namespace Redis users: namespace
// A's worker processes, started by the stand-in kubelet with the credential
// the operator put in A's Secret, run A's tasks, and that credential gets
// NOPERM on namespace B's keys and on FLUSHALL.
func TestTenantIsolation(t *testing.T) {
	e := single
	nsA, nsB := e.namespace(t, "e2e-tenant-a"), e.namespace(t, "e2e-tenant-b")
	qa := e.queue(t, nsA, nil)
	e.queue(t, nsB, nil)
	ctx := t.Context()

	must(t, poll(ctx, time.Minute, func() error {
		q := &dtqv1alpha1.Queue{}
		if err := e.stack.Client.Get(ctx, client.ObjectKeyFromObject(qa), q); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(q.Status.Conditions, dtqv1alpha1.QueueRedisIsolated) {
			return fmt.Errorf("queue %s/q not isolated: %+v", nsA, q.Status.Conditions)
		}
		return nil
	}))
	sec := &corev1.Secret{}
	must(t, e.stack.Client.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "dtq-redis-user"}, sec))
	user, password := string(sec.Data[corev1.BasicAuthUsernameKey]), string(sec.Data[corev1.BasicAuthPasswordKey])
	dep := &appsv1.Deployment{}
	must(t, e.stack.Client.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "q-workers"}, dep))
	if spec, _ := json.Marshal(dep.Spec); password == "" || strings.Contains(string(spec), password) {
		t.Fatalf("the worker Deployment spec holds the Redis password (or the Secret has none)")
	}

	e.createAll(t, []*dtqv1alpha1.Task{
		newTask("count", nsA, "tenant", demo.Counter, map[string]string{"name": "e2e-tenant"}).Key("tenant-1").Obj(),
		newTask("echo", nsA, "tenant", demo.Echo, map[string]int{"n": 1}).Obj(),
	})
	for name, task := range e.waitTerminal(t, nsA, "tenant", 2, 2*time.Minute) {
		if task.Status.State != dtqv1alpha1.TaskSucceeded {
			t.Errorf("%s: %s", name, describe(task))
		}
	}
	if n := e.counter(t, nsA, "e2e-tenant"); n != 1 {
		t.Errorf("counter = %d, want 1", n)
	}

	asA, err := redisconn.Config{URL: e.stack.RedisURL(), Username: user, Password: password}.Client()
	must(t, err)
	defer asA.Close()
	must(t, asA.Ping(ctx).Err())
	bConfig := broker.KeyPrefix(broker.QueueRef{Namespace: nsB, Name: "q"}) + "config"
	for _, cmd := range [][]any{{"HGETALL", bConfig}, {"DEL", bConfig}, {"FLUSHALL"}, {"KEYS", "*"}} {
		if err := asA.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%v as %s: %v, want NOPERM", cmd, user, err)
		}
	}
	if n, err := e.rdb.Exists(ctx, bConfig).Result(); err != nil || n != 1 {
		t.Errorf("namespace B's queue config: exists=%d %v", n, err)
	}
}
