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

package worker

import "sync"

// OtherTaskTypes is the task_type label value shared by the task types the
// worker has no handler for, so that submitting tasks of random types cannot
// create unbounded metric series.
const OtherTaskTypes = "other"

// maxTypeLabels bounds the task_type values of a handler that is not a Mux
// (it may take any type): the first maxTypeLabels types seen keep their name.
const maxTypeLabels = 100

// typeLabels maps a task type to its task_type label value: a Mux's
// registered types keep their name (checked on every task, since handlers
// may be registered after NewServer), others are OtherTaskTypes.
type typeLabels struct {
	mux  *Mux
	mu   sync.Mutex
	seen map[string]bool
}

func newTypeLabels(h Handler) *typeLabels {
	m, _ := h.(*Mux)
	return &typeLabels{mux: m, seen: map[string]bool{}}
}

func (l *typeLabels) of(taskType string) string {
	if l.mux != nil {
		if _, ok := l.mux.Handler(taskType); ok {
			return taskType
		}
		return OtherTaskTypes
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[taskType] || len(l.seen) < maxTypeLabels {
		l.seen[taskType] = true
		return taskType
	}
	return OtherTaskTypes
}

// metricsOf returns the measurements of taskType's label value, asked of
// the queue's QueueMetrics once per value; the values are bounded
// (typeLabels), so are the answers kept.
func (s *Server) metricsOf(taskType string) TaskMetrics {
	label := s.types.of(taskType)
	if tm, ok := s.byType.Load(label); ok {
		return tm.(TaskMetrics)
	}
	v, _ := s.byType.LoadOrStore(label, s.qm.TaskType(label))
	return v.(TaskMetrics)
}
