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

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

func newQueueCommand(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "List, pause and resume Queues",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newQueueListCommand(c), newQueuePauseCommand(c, true), newQueuePauseCommand(c, false))
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
			kc, err := c.objects()
			if err != nil {
				return err
			}
			if all {
				kc.ns = ""
			}
			if output == "" || output == "wide" {
				t, err := kc.table(cmd.Context(), "queues", "", metav1.ListOptions{})
				if err != nil {
					return err
				}
				return printTableOrNone(c, t, "Queues", kc.ns, output == "wide", all)
			}
			list, err := kc.listQueues(cmd.Context())
			if err != nil {
				return err
			}
			return printObject(c.streams.Out, list, output, "")
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
			q := &dtqv1alpha1.Queue{}
			if err := kc.mergePatch(cmd.Context(), "queues", args[0], map[string]any{"spec": map[string]any{"paused": paused}}, q); err != nil {
				return err
			}
			return p.PrintObj(q, c.streams.Out)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json, yaml, name, jsonpath=TEMPLATE.")
	return cmd
}
