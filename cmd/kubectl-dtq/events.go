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
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/dtq-dev/dtq/pkg/client"
)

// lastEntryQuiet is how long events without -f waits for more events of the
// stream entry that was the newest when it started (a batch's TaskQueued
// entry holds several events), or with --task for the task's next event,
// before it ends.
const lastEntryQuiet = time.Second

func newEventsCommand(c *cli) *cobra.Command {
	var output, since, task string
	var follow bool
	cmd := &cobra.Command{
		Use:   "events QUEUE",
		Short: "A queue's task events (HTTP API); -f follows them",
		Long: `events prints a queue's lifecycle events (TaskQueued, TaskStarted, TaskSucceeded,
TaskDeadLettered ...) from the dtq HTTP API's events stream, one per line: event
ID, time, type, task ID, attempt, and for TaskProgress the progress the handler
reported (JSON). Without -f it prints the events kept (about the
last 10,000 of the queue, or those after --since) and ends; with -f it follows
new ones until interrupted, from now on unless --since says where to start
(--since 0: replay the kept events first). A dropped connection (an API restart, a
network blip) is resumed after the last event printed (Last-Event-ID), so no event
is missed or printed twice. -o json prints one JSON object per line.`,
		Example: `  kubectl dtq events emails
  kubectl dtq events emails -f
  kubectl dtq events emails -f --since 0 --task 01JD6Q1T0F4N3
  kubectl dtq events emails -f -o json | jq -r 'select(.type=="TaskDeadLettered").task_id'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return fmt.Errorf("-o %q: events print as lines, json or yaml", output)
			}
			q, err := c.apiQueue(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if since == "" {
				since = "0" // without -f: the events kept
				if follow {
					since = "now" // as the API's stream: from now on
				}
			}
			opts := client.EventsOptions{Since: since, TaskID: task}
			if since == "now" {
				opts.Since = ""
			}
			end := ""
			if !follow {
				if since == "now" {
					return errors.New("--since now needs -f: without it there is nothing to print")
				}
				if end, err = newestEntry(ctx, q); err != nil || end == "" {
					return err // no events yet
				}
			}
			s, err := q.Events(ctx, opts)
			if err != nil {
				return err
			}
			defer s.Close()
			// Without -f the end is the newest entry when it started, and
			// a quiet second after its first event (an entry may hold
			// several). With --task the server leaves other tasks' events
			// out, so the end may never show: a quiet second after the
			// last event ends it.
			var quiet *time.Timer
			if end != "" && task != "" {
				quiet = time.AfterFunc(lastEntryQuiet, func() { _ = s.Close() })
				defer quiet.Stop()
			}
			for {
				ev, err := s.Next()
				if err != nil {
					if ctx.Err() != nil || quiet != nil && errors.Is(err, context.Canceled) {
						return nil // interrupted, or the end of the events without -f
					}
					return err
				}
				if ev.Type == client.EventsTruncated {
					fmt.Fprintln(c.streams.ErrOut, "Warning: events were trimmed from the queue's stream since --since; some may be missing.")
					continue
				}
				entry, _, _ := strings.Cut(ev.EventID, ":")
				if end != "" && entryAfter(entry, end) {
					return nil
				}
				if err := printEvent(c, output, ev); err != nil {
					return err
				}
				switch {
				case end != "" && task != "":
					quiet.Reset(lastEntryQuiet)
				case end != "" && entry == end && quiet == nil:
					quiet = time.AfterFunc(lastEntryQuiet, func() { _ = s.Close() })
					defer quiet.Stop()
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "Keep following new events (resumes by itself after a disconnect).")
	cmd.Flags().StringVar(&since, "since", "", `Start after this event ID; "0": the oldest kept; "now" (with -f): only new events (default: "now" with -f, else "0").`)
	cmd.Flags().StringVar(&task, "task", "", "Only the events of this task ID.")
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml, one document per event (default: a line per event).")
	return cmd
}

// newestEntry returns the stream entry that is the newest now ("" when the
// queue has no events): the position a stream opened from now starts at.
func newestEntry(ctx context.Context, q *client.Queue) (string, error) {
	s, err := q.Events(ctx, client.EventsOptions{})
	if err != nil {
		return "", err
	}
	defer s.Close()
	if e := s.LastEventID(); e != "0-0" {
		return e, nil
	}
	return "", nil
}

// entryAfter orders stream entry IDs "<ms>-<seq>".
func entryAfter(a, b string) bool {
	var am, as, bm, bs uint64
	_, _ = fmt.Sscanf(a, "%d-%d", &am, &as)
	_, _ = fmt.Sscanf(b, "%d-%d", &bm, &bs)
	return am > bm || am == bm && as > bs
}

func printEvent(c *cli, output string, ev client.Event) error {
	w := c.streams.Out
	switch output {
	case "json":
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "---\n%s", b)
		return err
	}
	_, err := fmt.Fprintf(w, "%-22s %s %-22s %s %d", ev.EventID, ev.Time.UTC().Format(time.RFC3339Nano), ev.Type, ev.TaskID, ev.Attempt)
	if err == nil && ev.Progress != nil {
		_, err = fmt.Fprintf(w, " %s", ev.Progress)
	}
	if err == nil {
		_, err = fmt.Fprintln(w)
	}
	return err
}
