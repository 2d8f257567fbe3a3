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

package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dtq-dev/dtq/pkg/broker"
)

// unreachableRetry is how long the Tasks of a queue whose Redis did not
// answer wait before one of them calls it again.
const unreachableRetry = time.Second

// unreachableQueues remembers the queues whose Redis did not answer a Task's
// reconcile (broker.Unreachable), so that their other Tasks wait without
// calling it. On a Redis Cluster with one master down, each call to it takes
// a Task controller worker for go-redis' dial retries: without this, the
// down master's Tasks would take the workers in turn while the Tasks of
// queues on the other masters wait behind them.
type unreachableQueues struct {
	mu    sync.Mutex
	until map[types.NamespacedName]time.Time
}

// wait returns how long the Tasks of queue q wait before calling Redis
// (0: call now).
func (u *unreachableQueues) wait(q types.NamespacedName, now time.Time) time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	return max(u.until[q].Sub(now), 0)
}

// observe records what a reconcile of a Task of queue q returned: an
// unreachable Redis holds the queue's Tasks for unreachableRetry, any other
// result releases them.
func (u *unreachableQueues) observe(q types.NamespacedName, err error, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case broker.Unreachable(err):
		if u.until == nil {
			u.until = map[types.NamespacedName]time.Time{}
		}
		u.until[q] = now.Add(unreachableRetry)
	case u.until != nil:
		delete(u.until, q)
	}
}
