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

	"github.com/redis/go-redis/v9"
)

// EventBounds returns the IDs of the oldest and the newest entry of the
// queue's events stream ("" for both when it is empty or absent). A reader
// that starts at the newest sees every later event; one resuming after an ID
// older than the oldest may have missed trimmed entries (the stream keeps
// about EventsMaxLen).
func (b *Broker) EventBounds(ctx context.Context, q QueueRef) (oldest, newest string, err error) {
	k := keysFor(q).events()
	var first, last *redis.XMessageSliceCmd
	if _, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		first = p.XRangeN(ctx, k, "-", "+", 1)
		last = p.XRevRangeN(ctx, k, "+", "-", 1)
		return nil
	}); err != nil {
		return "", "", fmt.Errorf("broker: events of %s: %w", q, err)
	}
	if len(first.Val()) == 0 || len(last.Val()) == 0 {
		return "", "", nil
	}
	return first.Val()[0].ID, last.Val()[0].ID, nil
}
