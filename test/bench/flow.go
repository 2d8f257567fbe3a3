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
	"fmt"
	"time"

	"github.com/dtq-dev/dtq/pkg/broker"
)

// Flow control (issue 35): the workers' drain (20,000 no-op tasks, one
// worker with 32 slots) on a flow-controlled queue: the tasks spread over
// 1,000 flow keys (task i has key i*7919 mod 1,000, so keys interleave),
// weighted fairness with every tenth key of weight 2-5 and the rest 1, a per-key cap
// of 64 that 32 slots never reach. Against the same tasks (their keys inert)
// on the queue without flow control, and against asynq's drain; the flow
// drain runs once for each row.
func init() {
	const name = "drain 20k no-op, 1,000 keys weighted, 32 slots"
	register(Case{Group: "Flow", Name: name, PeerName: "dtq, no flow control", Dtq: flowDrain, Peer: unflowedDrain})
	register(Case{Group: "Flow", Name: name, Dtq: flowDrain, Peer: asynqDrain})
}

const flowKeys = 1000

func flowKey(i int) string { return fmt.Sprintf("tenant-%04d", i*7919%flowKeys) }

// drainFlow is the flow control of the drain's queue.
func drainFlow() *broker.FlowControl {
	fc := &broker.FlowControl{
		PerKey:    broker.KeyLimits{Concurrency: 64},
		Fairness:  broker.FairnessWeighted,
		Overrides: map[string]broker.KeyOverride{},
	}
	for k := 0; k < flowKeys; k += 10 {
		fc.Overrides[fmt.Sprintf("tenant-%04d", k)] = broker.KeyOverride{Weight: 2 + int64(k/10%4)}
	}
	return fc
}

func flowDrain(ctx context.Context, p Params) (int, time.Duration, error) {
	return drainThrough(ctx, p, "dtq-flow", backlog{flow: drainFlow(), key: flowKey}, noopServer)
}

func unflowedDrain(ctx context.Context, p Params) (int, time.Duration, error) {
	return drainThrough(ctx, p, "dtq-keys-inert", backlog{key: flowKey}, noopServer)
}
