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
	"context"
	"fmt"
)

// purgeBatch is how many tasks one purge script call handles.
const purgeBatch = 500

// PurgeQueue cancels every task waiting in the queue: queued and not yet
// handed to a worker, delayed, or waiting for a retry. Each ends Cancelled
// with its idempotency record failed, as Cancel ends it. Tasks that workers
// hold are left to finish. It works in script calls of purgeBatch tasks, so
// other clients run in between; a task submitted meanwhile may be purged too.
// It returns how many tasks it cancelled.
func (b *Broker) PurgeQueue(ctx context.Context, q QueueRef) (int64, error) {
	return b.purgeQueue(ctx, q, purgeBatch)
}

func (b *Broker) purgeQueue(ctx context.Context, q QueueRef, batch int) (int64, error) {
	k := keysFor(q)
	keys := make([]string, 0, 12)
	for band := range 10 {
		keys = append(keys, k.stream(band))
	}
	keys = k.guarded(append(keys, k.schedule())...)
	var total int64
	for {
		now, nowtxt := b.now()
		v, err := purgeQueueScript.Run(ctx, b.rdb, keys, k.prefix, now, nowtxt, batch).Int64Slice()
		if err != nil {
			return total, fmt.Errorf("broker: purge queue %s: %w", q, err)
		}
		total += v[0]
		if v[1] == 0 {
			return total, nil
		}
	}
}
