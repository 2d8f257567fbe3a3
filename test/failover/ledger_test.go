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

package failover

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// ledger is the run's own account of what happened, kept in the test
// process, not in Redis (which is what fails): the submissions Redis
// acknowledged, by idempotency key, and how often a handler ran each key.
type ledger struct {
	mu    sync.Mutex
	acked map[string]string // key -> task ID
	runs  map[string]int    // key -> handler executions
}

func newLedger() *ledger { return &ledger{acked: map[string]string{}, runs: map[string]int{}} }

func (l *ledger) ack(key, taskID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked[key] = taskID
}

func (l *ledger) ran(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[key]++
}

func (l *ledger) executions() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.runs {
		n += r
	}
	return n
}

// check returns the acknowledged keys no handler ever ran (lost) and the
// keys a handler ran more than once (duplicated), sorted.
func (l *ledger) check() (lost, duplicated []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for key := range l.acked {
		if l.runs[key] == 0 {
			lost = append(lost, key)
		}
	}
	for key, n := range l.runs {
		if n > 1 {
			duplicated = append(duplicated, key)
		}
	}
	slices.Sort(lost)
	slices.Sort(duplicated)
	return lost, duplicated
}

// The ledger reports a planted loss and a planted duplicate, and nothing
// when every acknowledged key ran once.
func TestLedgerReportsPlantedFaults(t *testing.T) {
	l := newLedger()
	for i := range 5 {
		l.ack(fmt.Sprint("k", i), fmt.Sprint("t", i))
	}
	for i := range 5 {
		l.ran(fmt.Sprint("k", i))
	}
	if lost, dup := l.check(); len(lost) != 0 || len(dup) != 0 {
		t.Fatalf("clean run: lost %v, duplicated %v", lost, dup)
	}
	l.ack("never-ran", "t9")
	l.ran("k3")
	lost, dup := l.check()
	if !slices.Equal(lost, []string{"never-ran"}) || !slices.Equal(dup, []string{"k3"}) {
		t.Fatalf("planted faults: lost %v, duplicated %v; want [never-ran] and [k3]", lost, dup)
	}
}
