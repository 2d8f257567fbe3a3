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
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/dtq-dev/dtq/pkg/client"
)

func newFlowCommand(c *cli) *cobra.Command {
	var output string
	var top int
	cmd := &cobra.Command{
		Use:   "flow QUEUE [--top N]",
		Short: "Flow control of a queue: what its limits admit and its busiest keys (HTTP API)",
		Long: `flow shows, through the dtq HTTP API, the flow control of a Queue with
spec.flowControl (docs/flow-control.md): a line with the queued tasks its limits
admit now and those they hold back, the slots held, the keys with work and those
parked, the limits holding work back; then its --top busiest flow keys (most held
slots first, then the longest backlog) with their backlog, held slots, concurrency
cap, weight and why a key is parked (KeyConcurrency: at its cap; KeyRateLimit:
over its rate, -o wide says until when). The key "" (shown <none>) is that of the
tasks submitted without one.`,
		Example: `  kubectl dtq flow emails
  kubectl dtq flow emails --top 100 -o wide
  kubectl dtq flow emails -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if top < 1 || top > client.MaxFlowTop {
				return fmt.Errorf("--top must be 1..%d", client.MaxFlowTop)
			}
			q, err := c.apiQueue(args[0])
			if err != nil {
				return err
			}
			f, err := q.Flow(cmd.Context(), top)
			if err != nil {
				return err
			}
			if f.Flow == nil && output != "json" && output != "yaml" {
				_, err := fmt.Fprintf(c.streams.ErrOut, "Queue %s/%s has no flow control (spec.flowControl).\n", f.Namespace, f.Queue)
				return err
			}
			if output == "" || output == "wide" {
				if _, err := fmt.Fprintln(c.streams.Out, flowSummary(f.Flow)); err != nil {
					return err
				}
			}
			return flowView(f, time.Now()).print(c, output, "No flow keys with work in queue "+args[0]+".")
		},
	}
	cmd.Flags().IntVar(&top, "top", client.DefaultFlowTop, fmt.Sprintf("How many keys to show, 1..%d.", client.MaxFlowTop))
	cmd.Flags().StringVarP(&output, "output", "o", "", apiOutputHelp)
	return cmd
}

// flowSummary is the line above the keys: what the limits admit and hold
// back now, and which limits bind.
func flowSummary(f *client.FlowStats) string {
	keys := "keys"
	if f.ActiveKeys == 1 {
		keys = "key"
	}
	s := fmt.Sprintf("%d admissible, %d throttled, %d running (held slots); %d %s with work, %d parked; limited by %s",
		f.Admissible, f.Throttled, f.Held, f.ActiveKeys, keys, f.ParkedKeys, limitedBy(f))
	if f.MeanExecSeconds > 0 {
		s += fmt.Sprintf("; mean execution %s", time.Duration(f.MeanExecSeconds*float64(time.Second)).Round(time.Millisecond))
	}
	return s
}

// limitedBy lists the binding limits, "<none>" when none binds (and for a
// queue without flow control).
func limitedBy(f *client.FlowStats) string {
	if f == nil || len(f.LimitedBy) == 0 {
		return "<none>"
	}
	ls := make([]string, len(f.LimitedBy))
	for i, l := range f.LimitedBy {
		ls[i] = string(l)
	}
	return strings.Join(ls, ",")
}

// flowView is the table of a queue's keys; -o name prints the keys.
func flowView(f *client.QueueFlow, now time.Time) apiView {
	v := apiView{doc: f, columns: []apiColumn{{name: "Key"}, {name: "Queued"}, {name: "Held"}, {name: "Concurrency"},
		{name: "Weight"}, {name: "Parked"}, {name: "Eligible In", wide: true}}}
	for _, k := range f.Keys {
		v.names = append(v.names, k.Key)
		v.rows = append(v.rows, []any{blankNone(k.Key), k.Queued, k.Held, capOrNone(k.Concurrency), k.Weight,
			blankNone(string(k.Parked)), eligibleIn(k.EligibleAt, now)})
	}
	return v
}

// blankNone is s, or "<none>" (kubectl's blank table cell) when empty.
func blankNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// capOrNone is a cap, "<none>" when 0 (no cap).
func capOrNone(n int64) string {
	if n == 0 {
		return "<none>"
	}
	return fmt.Sprint(n)
}

// eligibleIn says how long until a rate-parked key may start again.
func eligibleIn(t *time.Time, now time.Time) string {
	if t == nil {
		return "<none>"
	}
	if !t.After(now) {
		return "now"
	}
	return duration.HumanDuration(t.Sub(now))
}
