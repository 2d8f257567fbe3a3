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

package chaoscheck

import (
	"context"
	"errors"
	"sort"

	"github.com/redis/go-redis/v9"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
)

// FromTasks groups chaos Task CRs by spec.idempotencyKey into logical tasks,
// sorted by key, as their submitters see them: each Task's task ID (the one
// its status says it duplicates, for a duplicate), Succeeded when every Task
// of the key is, the highest attempt, the earlier runs of its status.history
// and its spec.maxAttempts (defaultMaxAttempts when unset).
func FromTasks(tasks []*dtqv1alpha1.Task, defaultMaxAttempts int) []Logical {
	byKey := map[string]*Logical{}
	for _, task := range tasks {
		key := task.Spec.IdempotencyKey
		lt := byKey[key]
		if lt == nil {
			lt = &Logical{Key: key, Succeeded: true, MaxAttempts: defaultMaxAttempts}
			byKey[key] = lt
		}
		st := task.Status
		id := st.TaskID
		if st.Idempotency != nil && st.Idempotency.Duplicate {
			id = st.Idempotency.TaskID
		}
		lt.TaskIDs = append(lt.TaskIDs, id)
		lt.Succeeded = lt.Succeeded && st.State == dtqv1alpha1.TaskSucceeded
		lt.Attempt = max(lt.Attempt, int(st.Attempt))
		if task.Spec.MaxAttempts != nil {
			lt.MaxAttempts = int(*task.Spec.MaxAttempts)
		}
		if len(st.History) > len(lt.EarlierRuns) { // the original's: a duplicate mirrors no history
			lt.EarlierRuns = lt.EarlierRuns[:0]
			for _, run := range st.History {
				lt.EarlierRuns = append(lt.EarlierRuns, int(run.Attempts))
			}
		}
	}
	out := make([]Logical, 0, len(byKey))
	for _, lt := range byKey {
		out = append(out, *lt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// ReadEffects reads the chaos handler's counters (demo.ChaosEffectKey) of
// keys in namespace ns; a missing counter, or one that holds no integer, is 0.
func ReadEffects(ctx context.Context, rdb redis.UniversalClient, ns string, keys []string) (map[string]int64, error) {
	cmds := make([]*redis.StringCmd, len(keys))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.Get(ctx, demo.ChaosEffectKey(ns, k))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	effects := make(map[string]int64, len(keys))
	for i, k := range keys {
		effects[k], _ = cmds[i].Int64()
	}
	return effects, nil
}
