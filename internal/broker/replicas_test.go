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

package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/internal/testutil/redistest"
)

// With WithReplicaAck a submission returns once the replica has it. With the
// replica gone every submission fails with ErrNotReplicated (WAIT cannot
// confirm even a replay); the failed one is on the master all the same, and
// once the replica is back a retry with its key finds it.
func TestReplicaAck(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, 1, 1)
	b := New(s.Master.Client(), WithReplicaAck(1, 200*time.Millisecond))
	q := QueueRef{Namespace: "ns", Name: "q"}
	if err := b.EnsureQueue(ctx, q, DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	r, err := b.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Replicas[0].Client().Exists(ctx, keysFor(q).task(r.Task.ID)).Result(); err != nil || n != 1 {
		t.Fatalf("the acknowledged task is not on the replica: %d %v", n, err)
	}

	s.Replicas[0].Kill()
	for range 2 {
		if _, err = b.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "k2"}); !errors.Is(err, ErrNotReplicated) {
			t.Fatalf("submit with the replica down: %v, want ErrNotReplicated", err)
		}
	}
	s.Replicas[0].Restart()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = b.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "k2"})
		if !errors.Is(err, ErrNotReplicated) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the replica resyncs
	}
	if be := wantCode(t, err, CodeIdempotencyInProgress); be.TaskID == "" {
		t.Fatalf("retry: %v, want the in-progress task of the first try", err)
	}
}

// On a cluster WAIT runs on the master of the queue's slot: with no replicas,
// zero are enough and one is not.
func TestReplicaAckOnCluster(t *testing.T) {
	t.Parallel()
	cc := redistest.StartCluster(t, 3)
	for n, want := range map[int]error{0: nil, 1: ErrNotReplicated} {
		b := New(cc, WithReplicaAck(n, 50*time.Millisecond))
		for _, name := range []string{"a", "b", "c", "d"} {
			q := QueueRef{Namespace: "ns", Name: name}
			if err := b.EnsureQueue(ctx, q, DefaultQueueConfig()); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Submit(ctx, q, SubmitRequest{Type: "t"}); !errors.Is(err, want) {
				t.Fatalf("%s with %d replicas required: %v, want %v", q, n, err, want)
			}
		}
	}
}
