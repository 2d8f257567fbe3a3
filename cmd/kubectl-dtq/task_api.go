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
	"errors"

	"github.com/dtq-dev/dtq/pkg/client"
)

// apiTaskColumns are the columns of tasks read through the HTTP API.
var apiTaskColumns = []apiColumn{{name: "Task ID"}, {name: "Queue"}, {name: "Type"}, {name: "State"}, {name: "Attempt"}, {name: "Age"},
	{name: "Key", wide: true}, {name: "Previous Attempts", wide: true}, {name: "Worker", wide: true}, {name: "Error", wide: true}}

func apiTaskView(doc any, tasks []client.Task) apiView {
	v := apiView{doc: doc, columns: apiTaskColumns}
	for _, t := range tasks {
		v.names = append(v.names, t.TaskID)
		v.rows = append(v.rows, []any{t.TaskID, t.Queue, t.TaskType, string(t.Status), t.Attempt, age(t.CreatedAt),
			t.IdempotencyKey, t.PreviousAttempts, t.Execution.WorkerID, t.Execution.ErrorMessage})
	}
	return v
}

// getViaAPI prints tasks of queue by ID from the HTTP API.
func getViaAPI(ctx context.Context, c *cli, queue string, ids []string, output string) error {
	if queue == "" {
		return errors.New("--via-api needs --queue: a task ID is looked up in its queue")
	}
	q, err := c.apiQueue(queue)
	if err != nil {
		return err
	}
	var tasks []client.Task
	for _, id := range ids {
		t, err := q.Get(ctx, id)
		if err != nil {
			return err
		}
		tasks = append(tasks, *t)
	}
	var doc any = client.TaskList{Tasks: tasks, Count: len(tasks)}
	if len(tasks) == 1 {
		doc = tasks[0]
	}
	return apiTaskView(doc, tasks).print(c, output, "")
}

// listViaAPI lists the engine's tasks of --queue (or of every queue of the
// namespace) through the HTTP API, following the pages.
func (f *listFlags) listViaAPI(ctx context.Context, c *cli) error {
	if f.typ != "" || f.key != "" || f.selector != "" || f.allNamespaces {
		return errors.New("--via-api filters by --queue and --state only (--type, --key, -l and -A are for Task objects)")
	}
	if err := canonicalState(&f.state); err != nil {
		return err
	}
	api, err := c.apiClient()
	if err != nil {
		return err
	}
	ns, err := c.namespace()
	if err != nil {
		return err
	}
	queues := []string{f.queue}
	if f.queue == "" {
		all, err := api.Queues(ctx, ns)
		if err != nil {
			return err
		}
		queues = queues[:0]
		for _, q := range all {
			queues = append(queues, q.Queue)
		}
	}
	var tasks []client.Task
	for _, name := range queues {
		q, n, cont := api.Queue(ns, name), 0, ""
		for {
			page, err := q.List(ctx, client.ListOptions{Status: client.TaskStatus(f.state), Limit: 500, Continue: cont})
			if err != nil {
				return err
			}
			for _, t := range page.Tasks {
				if f.limit == 0 || n < f.limit {
					tasks = append(tasks, t)
					n++
				}
			}
			if cont = page.Continue; cont == "" || f.limit > 0 && n >= f.limit {
				break
			}
		}
	}
	return apiTaskView(client.TaskList{Tasks: tasks, Count: len(tasks)}, tasks).print(c, f.output, "No tasks found in namespace "+ns+".")
}
