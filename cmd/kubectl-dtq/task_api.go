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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/dtq-dev/dtq/pkg/client"
)

// apiTaskColumns are the columns of tasks read through the HTTP API.
// The wide ones include the flow key and the wait reason, last.
var apiTaskColumns = []apiColumn{{name: "Task ID"}, {name: "Queue"}, {name: "Type"}, {name: "State"}, {name: "Attempt"}, {name: "Age"},
	{name: "Key", wide: true}, {name: "Flow Key", wide: true}, {name: "Previous Attempts", wide: true}, {name: "Worker", wide: true},
	{name: "Error", wide: true}, {name: "Progress", wide: true}, {name: "Wait Reason", wide: true}}

func apiTaskView(doc any, tasks []client.Task) apiView {
	v := apiView{doc: doc, columns: apiTaskColumns}
	for _, t := range tasks {
		v.names = append(v.names, t.TaskID)
		v.rows = append(v.rows, []any{t.TaskID, t.Queue, t.TaskType, string(t.Status), t.Attempt, age(t.CreatedAt),
			t.IdempotencyKey, t.FlowKey, t.PreviousAttempts, t.Execution.WorkerID, t.Execution.ErrorMessage,
			string(t.Execution.Progress), t.WaitReason})
	}
	return v
}

// withWaitReason shows the Wait Reason column in the narrow table too (get
// of tasks one of which waits on a flow limit).
func (v apiView) withWaitReason() apiView {
	v.columns = slices.Clone(v.columns)
	v.columns[len(v.columns)-1].wide = false
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
	v := apiTaskView(doc, tasks)
	if slices.ContainsFunc(tasks, func(t client.Task) bool { return t.WaitReason != "" }) {
		v = v.withWaitReason()
	}
	return v.print(c, output, "")
}

// listViaAPI lists the engine's tasks of --queue (or of every queue of the
// namespace) through the HTTP API, following the pages.
func (f *listFlags) listViaAPI(ctx context.Context, c *cli) error {
	if f.typ != "" || f.key != "" || f.flowKey != "" || f.selector != "" || f.allNamespaces {
		return errors.New("--via-api filters by --queue and --state only (--type, --key, --flow-key, -l and -A are for Task objects)")
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
	pp := &pagePrinter{c: c, output: f.output}
	if err := pp.check(); err != nil {
		return err
	}
	n := 0
	for _, name := range queues {
		q, cont := api.Queue(ns, name), ""
		for {
			page, err := q.List(ctx, client.ListOptions{Status: client.TaskStatus(f.state), Limit: client.MaxPageSize, Continue: cont})
			if err != nil {
				return err
			}
			tasks := page.Tasks
			if f.limit > 0 {
				tasks = tasks[:min(len(tasks), f.limit-n)]
			}
			n += len(tasks)
			if err := pp.page(tasks); err != nil {
				return err
			}
			if cont = page.Continue; cont == "" || f.limit > 0 && n >= f.limit {
				break
			}
		}
	}
	return pp.end("No tasks found in namespace " + ns + ".")
}

// pagePrinter prints the tasks of list --via-api a page at a time, each
// page printed and dropped before the next is read, so the CLI holds one
// page (500 tasks) however many there are. -o json and yaml write one
// TaskList document; the table repeats no header.
type pagePrinter struct {
	c      *cli
	output string
	n      int
}

func (p *pagePrinter) check() error {
	switch p.output {
	case "", "wide", "name", "json", "yaml":
		return nil
	}
	return fmt.Errorf("-o %q: the HTTP API's documents print as wide, json, yaml or name", p.output)
}

func (p *pagePrinter) page(tasks []client.Task) error {
	w := p.c.streams.Out
	defer func() { p.n += len(tasks) }()
	switch p.output {
	case "json":
		for i, t := range tasks {
			b, err := json.MarshalIndent(t, "        ", "    ")
			if err != nil {
				return err
			}
			sep := ",\n"
			if p.n+i == 0 {
				sep = "{\n    \"tasks\": [\n"
			}
			if _, err := fmt.Fprintf(w, "%s        %s", sep, b); err != nil {
				return err
			}
		}
		return nil
	case "yaml":
		for i, t := range tasks {
			b, err := yaml.Marshal(t)
			if err != nil {
				return err
			}
			if p.n+i == 0 {
				if _, err := io.WriteString(w, "tasks:\n"); err != nil {
					return err
				}
			}
			item := "- " + strings.ReplaceAll(strings.TrimSuffix(string(b), "\n"), "\n", "\n  ") + "\n"
			if _, err := io.WriteString(w, item); err != nil {
				return err
			}
		}
		return nil
	case "name":
		for _, t := range tasks {
			if _, err := fmt.Fprintln(w, t.TaskID); err != nil {
				return err
			}
		}
		return nil
	}
	if len(tasks) == 0 {
		return nil
	}
	t := apiTaskView(nil, tasks).table()
	return printers.NewTablePrinter(printers.PrintOptions{Wide: p.output == "wide", NoHeaders: p.n > 0}).PrintObj(t, w)
}

// end closes the document (json, yaml) or says none were found (table).
func (p *pagePrinter) end(none string) error {
	w := p.c.streams.Out
	var err error
	switch {
	case p.output == "json" && p.n == 0:
		_, err = fmt.Fprintf(w, "{\n    \"tasks\": [],\n    \"count\": 0\n}\n")
	case p.output == "json":
		_, err = fmt.Fprintf(w, "\n    ],\n    \"count\": %d\n}\n", p.n)
	case p.output == "yaml" && p.n == 0:
		_, err = io.WriteString(w, "count: 0\ntasks: []\n")
	case p.output == "yaml":
		_, err = fmt.Fprintf(w, "count: %d\n", p.n)
	case (p.output == "" || p.output == "wide") && p.n == 0:
		_, err = fmt.Fprintln(p.c.streams.ErrOut, none)
	}
	return err
}
