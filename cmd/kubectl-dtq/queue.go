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
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/client"
)

func newQueueCommand(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Queues: list, stats, pause, resume, purge",
		Long: `queue list, pause and resume work on Queue objects through the API server;
stats and purge go through the dtq HTTP API (see --api-url).`,
		Example: `  kubectl dtq queue list
  kubectl dtq queue stats emails
  kubectl dtq queue pause emails`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newQueueListCommand(c), newQueueStatsCommand(c), newQueuePauseCommand(c, true), newQueuePauseCommand(c, false),
		newQueuePurgeCommand(c))
	return cmd
}

func newQueueListCommand(c *cli) *cobra.Command {
	var output string
	var all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List Queues with their backlog and workers",
		Long: `list shows the Queues of the namespace (-A: of every namespace) with the columns of
kubectl get queues.dtq.dev: queued, in flight, workers ready/desired, paused, Ready.`,
		Example: `  kubectl dtq queue list
  kubectl dtq queue list -A -o wide`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.printList(cmd.Context(), "queues", "Queues", metav1.ListOptions{}, &dtqv1alpha1.QueueList{}, output, all)
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List the Queues of every namespace.")
	cmd.Flags().StringVarP(&output, "output", "o", "", outputHelp)
	return cmd
}

// newQueuePauseCommand is "queue pause" (paused) or "queue resume". It sets
// the Queue's spec.paused: the Queue controller applies it in Redis and keeps
// it there, so the pause lasts and shows in Git-managed manifests' diffs.
func newQueuePauseCommand(c *cli, paused bool) *cobra.Command {
	verb, done, does := "resume", "resumed", "Let workers start tasks of the Queue again"
	if paused {
		verb, done, does = "pause", "paused", "Stop workers from starting tasks of the Queue (running ones finish)"
	}
	var output string
	cmd := &cobra.Command{
		Use:   verb + " QUEUE",
		Short: does,
		Long: does + `. It sets the Queue's spec.paused, which
the Queue controller applies in Redis (and keeps applied); submissions are still accepted.`,
		Example: fmt.Sprintf("  kubectl dtq queue %s emails\n  kubectl dtq -n shop queue %s default", verb, verb),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kc, err := c.objects()
			if err != nil {
				return err
			}
			p, err := printer(output, done)
			if err != nil {
				return err
			}
			// Resuming removes the field (false is its default), so the
			// Queue lists as one never paused: a blank PAUSED column.
			var value any
			if paused {
				value = true
			}
			q := &dtqv1alpha1.Queue{}
			if err := kc.mergePatch(cmd.Context(), "queues", args[0], map[string]any{"spec": map[string]any{"paused": value}}, q); err != nil {
				return err
			}
			return p.PrintObj(q, c.streams.Out)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json, yaml, name, jsonpath=TEMPLATE.")
	return cmd
}

func newQueueStatsCommand(c *cli) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "stats [QUEUE...]",
		Short: "Backlog and workers of queues, read from the engine (HTTP API)",
		Long: `stats reads the queues' backlog from the engine through the dtq HTTP API: depth
(queued and in flight; maxDepth gates depth plus scheduled), queued, in flight,
scheduled (delayed and retrying), dead letters and registered workers (draining
and stopped ones included); -o wide adds the depth per priority band (p0..p9).
When a queue shown has flow control (spec.flowControl), three columns follow:
the queued tasks its limits admit now, those they hold back (throttled), and the
limits that bind, most binding first (RateLimit, MaxConcurrency, KeyConcurrency,
KeyRateLimit; kubectl dtq flow QUEUE shows the keys).
Without QUEUE: every queue of the namespace.`,
		Example: `  kubectl dtq queue stats
  kubectl dtq queue stats emails -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.apiClient()
			if err != nil {
				return err
			}
			ns, err := c.namespace()
			if err != nil {
				return err
			}
			var stats []client.QueueStats
			if len(args) == 0 {
				if stats, err = api.Queues(cmd.Context(), ns); err != nil {
					return err
				}
			}
			for _, name := range args {
				st, err := api.Queue(ns, name).Stats(cmd.Context())
				if err != nil {
					return err
				}
				stats = append(stats, *st)
			}
			return queueStatsView(stats).print(c, output, "No queues found in namespace "+ns+".")
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", apiOutputHelp)
	return cmd
}

// queueStatsView is the table of queue stats; the flow columns are there
// when a queue of the table has flow control.
func queueStatsView(stats []client.QueueStats) apiView {
	v := apiView{doc: client.QueueList{Queues: stats}, columns: []apiColumn{{name: "Queue"}, {name: "Paused"}, {name: "Depth"},
		{name: "Queued"}, {name: "In Flight"}, {name: "Scheduled"}, {name: "Dead"}, {name: "Workers"}, {name: "By Priority", wide: true}}}
	flow := slices.ContainsFunc(stats, func(st client.QueueStats) bool { return st.Flow != nil })
	if flow {
		v.columns = append(v.columns, apiColumn{name: "Admissible"}, apiColumn{name: "Throttled"}, apiColumn{name: "Limited By"})
	}
	for _, st := range stats {
		v.names = append(v.names, st.Queue)
		row := []any{st.Queue, st.Paused, st.Depth, st.Queued, st.InFlight, st.Scheduled, st.DeadLettered,
			st.Workers, strings.Trim(fmt.Sprint(st.DepthByPriority), "[]")}
		switch {
		case flow && st.Flow == nil:
			row = append(row, "<none>", "<none>", "<none>")
		case flow:
			row = append(row, st.Flow.Admissible, st.Flow.Throttled, limitedBy(st.Flow))
		}
		v.rows = append(v.rows, row)
	}
	return v
}

func newQueuePurgeCommand(c *cli) *cobra.Command {
	return c.purgeCommand(&cobra.Command{
		Use:   "purge QUEUE",
		Short: "Cancel every waiting task of a queue (asks first, or --yes)",
		Long: `purge cancels, through the dtq HTTP API, every task waiting in the queue: queued
and not yet taken by a worker, delayed, or waiting for a retry. Each ends Cancelled
with its idempotency record failed, as a cancel ends it; running tasks finish. Task
objects of the purged tasks follow them. The dead letters stay (kubectl dtq dlq purge).`,
		Example: `  kubectl dtq queue purge emails
  kubectl dtq queue pause emails && kubectl dtq queue purge emails --yes`,
	}, func(st *client.QueueStats) string {
		waiting := st.Depth - st.InFlight + st.Scheduled
		return fmt.Sprintf("Cancel the %d waiting tasks of queue %s/%s?", waiting, st.Namespace, st.Queue)
	}, (*client.Queue).PurgeTasks, "tasks cancelled")
}
