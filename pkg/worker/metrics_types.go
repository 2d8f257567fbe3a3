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

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

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

// typeMetrics is the metric handles of one task_type label value of the
// server's queue. Each is looked up on its first use, so a series appears
// only once something happened to it (no zero-valued series of outcomes a
// task type never had).
type typeMetrics struct {
	started, succeeded, failed, retried, deadLettered, cancelled lazy[prometheus.Counter]
	execution, wait, latency                                     lazy[prometheus.Observer]
}

// lazy is a metric handle made on first use.
type lazy[T any] struct {
	once sync.Once
	make func() T
	v    T
}

func (l *lazy[T]) get() T {
	l.once.Do(func() { l.v = l.make() })
	return l.v
}

// bind is withLabelValues of lbl, called later.
func bind[T any](withLabelValues func(...string) T, lbl []string) func() T {
	return func() T { return withLabelValues(lbl...) }
}

// metricsOf returns the metric handles of taskType's label value, each looked
// up once per value (WithLabelValues hashes and validates its values on each
// call); the values are bounded (typeLabels), so are the handles kept.
func (s *Server) metricsOf(taskType string) *typeMetrics {
	label := s.types.of(taskType)
	if tm, ok := s.byType.Load(label); ok {
		return tm.(*typeMetrics)
	}
	lbl := []string{s.q.Namespace, s.q.Name, label}
	tm := &typeMetrics{}
	tm.started.make = bind(s.m.started.WithLabelValues, lbl)
	tm.succeeded.make = bind(s.m.succeeded.WithLabelValues, lbl)
	tm.failed.make = bind(s.m.failed.WithLabelValues, lbl)
	tm.retried.make = bind(s.m.retried.WithLabelValues, lbl)
	tm.deadLettered.make = bind(s.m.deadLettered.WithLabelValues, lbl)
	tm.cancelled.make = bind(s.m.cancelled.WithLabelValues, lbl)
	tm.execution.make = bind(s.m.execution.WithLabelValues, lbl)
	tm.wait.make = bind(s.m.wait.WithLabelValues, lbl)
	tm.latency.make = bind(s.m.latency.WithLabelValues, lbl)
	v, _ := s.byType.LoadOrStore(label, tm)
	return v.(*typeMetrics)
}
