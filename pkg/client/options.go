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

package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Producer submits and reads tasks of one queue. *Queue (over HTTP) and the
// direct producer's queue (pkg/client/direct, over Redis) implement it with
// the same semantics.
type Producer interface {
	Submit(ctx context.Context, taskType string, payload any, opts ...SubmitOption) (*Task, error)
	SubmitBatch(ctx context.Context, reqs []SubmitRequest) ([]BatchResult, error)
	Get(ctx context.Context, id string) (*Task, error)
}

// SubmitOption sets a field of a submission.
type SubmitOption func(*SubmitRequest)

// IdempotencyKey maps every submission with this key on the queue, while its
// record lives (the Queue's idempotencyTTL), to one logical task.
func IdempotencyKey(key string) SubmitOption {
	return func(r *SubmitRequest) { r.IdempotencyKey = key }
}

// Priority sets the priority, 0..9 (9 first); the default is 5.
func Priority(p int) SubmitOption { return func(r *SubmitRequest) { r.Priority = &p } }

// Delay holds the task back for d.
func Delay(d time.Duration) SubmitOption {
	return func(r *SubmitRequest) { r.DelaySeconds = d.Seconds() }
}

// NotBefore holds the task back until t.
func NotBefore(t time.Time) SubmitOption { return func(r *SubmitRequest) { r.NotBefore = &t } }

// TTL expires the task if it has not started within d.
func TTL(d time.Duration) SubmitOption { return func(r *SubmitRequest) { r.TTLSeconds = d.Seconds() } }

// MaxAttempts sets how many times the task may run, 1..10.
func MaxAttempts(n int) SubmitOption { return func(r *SubmitRequest) { r.MaxAttempts = n } }

// Timeout sets the handler's deadline, 1ms..1h.
func Timeout(d time.Duration) SubmitOption {
	return func(r *SubmitRequest) { r.TimeoutMs = d.Milliseconds() }
}

// Metadata stores m with the task (at most 4096 bytes as JSON). For other
// JSON values set SubmitRequest.Metadata.
func Metadata(m map[string]string) SubmitOption {
	return func(r *SubmitRequest) { r.Metadata, _ = json.Marshal(m) } // a map of strings always encodes
}

// FlowKey sets the task's flow key (1..128 printable ASCII characters, no
// space): on a Queue with flowControl its per-key limits and weighted share
// apply to the task (docs/flow-control.md).
func FlowKey(key string) SubmitOption { return func(r *SubmitRequest) { r.FlowKey = key } }

// NewSubmitRequest builds a submission: payload is encoded as JSON (a
// json.RawMessage or []byte is taken as is; nil means {}).
func NewSubmitRequest(taskType string, payload any, opts ...SubmitOption) (SubmitRequest, error) {
	r := SubmitRequest{TaskType: taskType}
	switch p := payload.(type) {
	case nil:
	case json.RawMessage:
		r.Payload = p
	case []byte:
		r.Payload = p
	default:
		b, err := json.Marshal(p)
		if err != nil {
			return r, fmt.Errorf("client: encode payload: %w", err)
		}
		r.Payload = b
	}
	for _, o := range opts {
		o(&r)
	}
	return r, nil
}

// ListOptions selects a page of tasks.
type ListOptions struct {
	// Status keeps only tasks in this state; "" for all.
	Status TaskStatus
	// Limit is the page size, 1..500; 0 means 50.
	Limit int
	// Continue is the previous page's Continue; "" for the first page.
	Continue string
	// IdempotencyKey lists only the task the key maps to (none when the
	// key maps to none); Status, Limit and Continue then do not apply.
	IdempotencyKey string
}

// MaxPageSize is the largest Limit of ListOptions and DeadLetterListOptions.
const MaxPageSize = 500

// DeadLetterListOptions selects a page of dead-letter entries.
type DeadLetterListOptions struct {
	// Limit is the page size, 1..500; 0 means 50.
	Limit int
	// Continue is the previous page's Continue; "" for the first page.
	Continue string
}

// EventsOptions selects a queue's events.
type EventsOptions struct {
	// Since is where to start: "" for now, "0" for the oldest event the
	// server keeps, or an event ID to resume after it.
	Since string
	// TaskID keeps only this task's events.
	TaskID string
}
