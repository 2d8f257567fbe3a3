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
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dtq-dev/dtq/pkg/client"
)

func newDLQCommand(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Dead letters of a queue (through the HTTP API): list, show, requeue, requeue-all, discard, purge",
		Long: `dlq works on a queue's dead-letter entries through the dtq HTTP API (see
--api-url): a task that used up its attempts (or failed with a permanent error)
ends DeadLettered with an entry here.`,
		Example: `  kubectl dtq dlq list emails
  kubectl dtq dlq show emails 01JD6Q1T0F4N3
  kubectl dtq dlq requeue emails 01JD6Q1T0F4N3`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newDLQListCommand(c), newDLQShowCommand(c), newDLQRequeueCommand(c), newDLQRequeueAllCommand(c), newDLQDiscardCommand(c), newDLQPurgeCommand(c))
	return cmd
}

var deadLetterColumns = []apiColumn{{name: "Task ID"}, {name: "Type"}, {name: "Attempts"}, {name: "Failed"}, {name: "Error"},
	{name: "Class", wide: true}, {name: "Entry", wide: true}}

func deadLetterRow(d client.DeadLetter) []any {
	return []any{d.TaskID, d.TaskType, d.AttemptsMade, age(d.FailedAt), d.LastError, d.LastErrorClass, d.EntryID}
}

func newDLQListCommand(c *cli) *cobra.Command {
	var output string
	var limit int
	cmd := &cobra.Command{
		Use:   "list QUEUE",
		Short: "List a queue's dead-letter entries, newest first",
		Example: `  kubectl dtq dlq list emails
  kubectl dtq dlq list emails --limit 0 -o name | xargs -r kubectl dtq dlq requeue emails`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return errors.New("--limit must be 0 (all) or more")
			}
			q, err := c.apiQueue(args[0])
			if err != nil {
				return err
			}
			var entries []client.DeadLetter
			opts := client.DeadLetterListOptions{}
			for {
				opts.Limit = client.MaxPageSize
				if limit > 0 {
					opts.Limit = min(limit-len(entries), client.MaxPageSize)
				}
				page, err := q.ListDeadLetters(cmd.Context(), opts)
				if err != nil {
					return err
				}
				entries = append(entries, page.Entries...)
				if opts.Continue = page.Continue; opts.Continue == "" || limit > 0 && len(entries) >= limit {
					break
				}
			}
			v := apiView{doc: client.DeadLetterList{Entries: entries, Count: len(entries)}, columns: deadLetterColumns}
			for _, d := range entries {
				v.names = append(v.names, d.TaskID)
				v.rows = append(v.rows, deadLetterRow(d))
			}
			return v.print(c, output, "No dead letters in queue "+args[0]+".")
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 50, "At most this many entries, newest first; 0 for all (read 500 at a time).")
	cmd.Flags().StringVarP(&output, "output", "o", "", apiOutputHelp)
	return cmd
}

// deadLetterView is what dlq show prints: the entry and its task.
type deadLetterView struct {
	Entry client.DeadLetter `json:"entry"`
	Task  *client.Task      `json:"task"`
}

func newDLQShowCommand(c *cli) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "show QUEUE TASK_ID",
		Short: "Show a dead-lettered task: its entry and its task (payload, attempts, error)",
		Example: `  kubectl dtq dlq show emails 01JD6Q1T0F4N3
  kubectl dtq dlq show emails 01JD6Q1T0F4N3 -o json | jq .task.payload`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := c.apiQueue(args[0])
			if err != nil {
				return err
			}
			d, err := q.DeadLetter(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			t, err := q.Get(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			if output == "" {
				w := c.streams.Out
				_, err := fmt.Fprintf(w, "Task ID:     %s\nType:        %s\nState:       %s\nAttempts:    %d (earlier runs: %d)\nFailed:      %s (%s ago)\nError class: %s\nError:       %s\nPayload:     %s\n",
					t.TaskID, t.TaskType, t.Status, d.AttemptsMade, t.PreviousAttempts, d.FailedAt.Format("2006-01-02T15:04:05Z07:00"), age(d.FailedAt),
					d.LastErrorClass, d.LastError, t.Payload)
				return err
			}
			return apiView{doc: deadLetterView{Entry: *d, Task: t}, names: []string{d.TaskID}}.print(c, output, "")
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json, yaml or name (default: a description).")
	return cmd
}

func newDLQRequeueCommand(c *cli) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "requeue QUEUE TASK_ID...",
		Short: "Run dead-lettered tasks again (attempt back to 1, idempotency record back to processing)",
		Long: `requeue puts each task back on its queue with attempt 1; the attempts of its
earlier runs are kept (previous_attempts) and its idempotency record goes back to
processing, so a resubmission of its key is in progress again, not a replay of the
failure. Task objects that mirror the task follow it. A task that is not
DeadLettered is refused (TASK_CONFLICT); a Failed Task object is retried with
kubectl dtq retry.`,
		Example: `  kubectl dtq dlq requeue emails 01JD6Q1T0F4N3
  kubectl dtq dlq requeue emails 01JD6Q1T0F4N3 && kubectl dtq get --via-api --queue emails 01JD6Q1T0F4N3`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := c.apiQueue(args[0])
			if err != nil {
				return err
			}
			for _, id := range args[1:] {
				t, err := q.Requeue(cmd.Context(), id)
				if err != nil {
					return err
				}
				if output == "" {
					fmt.Fprintf(c.streams.Out, "%s requeued\n", id)
					continue
				}
				if err := (apiView{doc: t, names: []string{t.TaskID}}).print(c, output, ""); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json, yaml or name (default: TASK_ID requeued).")
	return cmd
}

func newDLQRequeueAllCommand(c *cli) *cobra.Command {
	var yes bool
	var through string
	cmd := &cobra.Command{
		Use:   "requeue-all QUEUE",
		Short: "Run every dead-lettered task of a queue again (asks first, or --yes)",
		Long: `requeue-all requeues, as requeue does, the task of every dead-letter entry up to
--through (an entry ID, as dlq list -o wide shows; default: the newest entry when it
starts), oldest first. Entries added meanwhile are left alone, and a task that
someone else requeued or discarded meanwhile is skipped, never run twice. If it is
cut short, run it again with the --through it printed: it requeues the rest.`,
		Example: `  kubectl dtq dlq requeue-all emails
  kubectl dtq dlq requeue-all emails --yes --through 1796027753738-0`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := c.apiQueue(args[0])
			if err != nil {
				return err
			}
			if !yes {
				st, err := q.Stats(cmd.Context())
				if err != nil {
					return err
				}
				if err := c.confirm(fmt.Sprintf("Requeue the %d dead-lettered tasks of queue %s/%s?", st.DeadLettered, st.Namespace, st.Queue)); err != nil {
					return err
				}
			}
			res, err := q.RequeueAll(cmd.Context(), through)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.streams.Out, "%d requeued, %d skipped (entries through %s)\n", res.Requeued, res.Skipped, cmp.Or(res.Through, "none"))
			return err
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "Do not ask.")
	cmd.Flags().StringVar(&through, "through", "", "Requeue the entries up to this entry ID only (default: the newest when it starts).")
	return cmd
}

func newDLQDiscardCommand(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "discard QUEUE TASK_ID...",
		Short:   "Remove dead-letter entries; the tasks stay DeadLettered",
		Example: `  kubectl dtq dlq discard emails 01JD6Q1T0F4N3`,
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := c.apiQueue(args[0])
			if err != nil {
				return err
			}
			for _, id := range args[1:] {
				if _, err := q.Discard(cmd.Context(), id); err != nil {
					return err
				}
				fmt.Fprintf(c.streams.Out, "%s discarded\n", id)
			}
			return nil
		},
	}
	return cmd
}

func newDLQPurgeCommand(c *cli) *cobra.Command {
	return c.purgeCommand(&cobra.Command{
		Use:   "purge QUEUE",
		Short: "Remove every dead-letter entry of a queue (asks first, or --yes)",
		Example: `  kubectl dtq dlq purge emails
  kubectl dtq dlq purge emails --yes`,
	}, func(st *client.QueueStats) string {
		return fmt.Sprintf("Remove all %d dead-letter entries of queue %s/%s?", st.DeadLettered, st.Namespace, st.Queue)
	}, (*client.Queue).Purge, "dead-letter entries purged")
}

// purgeCommand completes cmd, a verb on one queue (QUEUE) that empties part
// of it: unless --yes it asks the question built from the queue's stats
// (confirm), then runs purge and prints "<count> <done>".
func (c *cli) purgeCommand(cmd *cobra.Command, question func(*client.QueueStats) string,
	purge func(*client.Queue, context.Context) (int64, error), done string) *cobra.Command {
	var yes bool
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		q, err := c.apiQueue(args[0])
		if err != nil {
			return err
		}
		if !yes {
			st, err := q.Stats(cmd.Context())
			if err != nil {
				return err
			}
			if err := c.confirm(question(st)); err != nil {
				return err
			}
		}
		n, err := purge(q, cmd.Context())
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.streams.Out, "%d %s\n", n, done)
		return err
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "Do not ask.")
	return cmd
}

// errNotConfirmed ends a destructive verb the user did not confirm.
var errNotConfirmed = errors.New("not confirmed: nothing changed (answer y, or pass --yes)")

// confirm asks question on stderr and reads the answer from stdin: y or yes
// goes on; anything else, or no answer (stdin closed), is errNotConfirmed.
func (c *cli) confirm(question string) error {
	fmt.Fprintf(c.streams.ErrOut, "%s [y/N] ", question)
	answer, _ := bufio.NewReader(c.streams.In).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return errNotConfirmed
}
