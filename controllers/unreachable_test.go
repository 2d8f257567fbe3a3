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
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dtq-dev/dtq/pkg/broker"
)

// A queue whose Redis did not answer holds its Tasks for unreachableRetry;
// other queues, and an answer (even a refusal), release them.
func TestUnreachableQueuesHoldOnlyTheirOwn(t *testing.T) {
	var u unreachableQueues
	down := types.NamespacedName{Namespace: "a", Name: "q"}
	up := types.NamespacedName{Namespace: "b", Name: "q"}
	now := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	refused := fmt.Errorf("get task x: broker: get task x: %w",
		&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	u.observe(down, refused, now)
	u.observe(up, nil, now)
	if d := u.wait(down, now.Add(300*time.Millisecond)); d != 700*time.Millisecond {
		t.Errorf("the unreachable queue waits %v, want 700ms", d)
	}
	if d := u.wait(up, now); d != 0 {
		t.Errorf("another queue waits %v, want 0", d)
	}
	if d := u.wait(down, now.Add(unreachableRetry)); d != 0 {
		t.Errorf("after unreachableRetry the queue waits %v, want 0", d)
	}
	u.observe(down, broker.ErrQueueFull, now)
	if d := u.wait(down, now); d != 0 {
		t.Errorf("after an answer the queue waits %v, want 0", d)
	}
}
