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
	"net/http"
	"time"
)

// Metrics receives a Server's measurements (Config.Metrics). Package
// workermetrics implements it with Prometheus: the dtq_worker_* series of
// docs/metrics.md, which the reference worker and the HTTP delivery sidecar
// serve. A Server without Metrics measures nothing, and a program that does
// not import workermetrics compiles no metrics library. Labels are the
// queue's namespace and name and a task_type value from a bounded set
// (OtherTaskTypes): never task IDs or payloads.
type Metrics interface {
	// Queue returns the measurements of a server's queue, which runs
	// concurrency handlers at most; NewServer calls it once.
	Queue(namespace, queue string, concurrency int) QueueMetrics
	// Handler serves the measurements on /metrics at Config.MetricsAddr;
	// nil serves no /metrics.
	Handler() http.Handler
}

// QueueMetrics measures one queue's tasks.
type QueueMetrics interface {
	// TaskType returns the measurements of one task_type label value; the
	// server asks once per value and keeps the answer.
	TaskType(taskType string) TaskMetrics
	// InFlight adds delta to the number of handlers running now.
	InFlight(delta int)
}

// TaskMetrics measures the tasks of one task_type label value.
type TaskMetrics interface {
	Started()      // a handler execution started
	Succeeded()    // an execution ended the task Succeeded
	Failed()       // an execution returned an error, whatever followed (retry, dead letter or Failed)
	Retried()      // a failed execution was scheduled for a retry
	DeadLettered() // the worker moved a task to DeadLettered (exhausted, permanent error, or crash loop on delivery)
	Cancelled()    // a running task stopped on a cancel request
	// Wait is the time from the task becoming runnable (submitted, or due
	// when delayed or retrying) to its handler starting.
	Wait(d time.Duration)
	// Execution is the handler's execution time.
	Execution(d time.Duration)
	// Latency is the time from the task becoming runnable to the outcome of
	// its execution being recorded: wait, execution and the completion write.
	Latency(d time.Duration)
}

// noMetrics measures nothing: the Server's Metrics when Config has none.
type noMetrics struct{}

func (noMetrics) Queue(string, string, int) QueueMetrics { return noMetrics{} }
func (noMetrics) Handler() http.Handler                  { return nil }
func (noMetrics) TaskType(string) TaskMetrics            { return noMetrics{} }
func (noMetrics) InFlight(int)                           {}
func (noMetrics) Started()                               {}
func (noMetrics) Succeeded()                             {}
func (noMetrics) Failed()                                {}
func (noMetrics) Retried()                               {}
func (noMetrics) DeadLettered()                          {}
func (noMetrics) Cancelled()                             {}
func (noMetrics) Wait(time.Duration)                     {}
func (noMetrics) Execution(time.Duration)                {}
func (noMetrics) Latency(time.Duration)                  {}
