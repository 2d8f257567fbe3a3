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
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/util/retry"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

func newCancelCommand(c *cli) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "cancel TASK",
		Short: "Cancel a Task (sets spec.cancel)",
		Long: `cancel sets spec.cancel on the Task: a waiting task ends Cancelled at once, a
running one gets its context cancelled. A Task that already finished is left
alone and cancel fails (exit 1).`,
		Example: `  kubectl dtq cancel sleep-cancel-me
  kubectl dtq cancel sleep-cancel-me && kubectl dtq wait sleep-cancel-me   # exits 2: Cancelled`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.change(cmd.Context(), args[0], output, "cancel requested", func(t *dtqv1alpha1.Task) (map[string]any, error) {
				if t.Status.State.Finished() {
					return nil, fmt.Errorf("task %s already ended %s; there is nothing to cancel", t.Name, t.Status.State)
				}
				return map[string]any{"cancel": true}, nil
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json, yaml, name, jsonpath=TEMPLATE.")
	return cmd
}

func newRetryCommand(c *cli) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "retry TASK",
		Short: "Run a Failed or DeadLettered Task again (raises spec.retryGeneration)",
		Long: `retry raises the Task's spec.retryGeneration by one. The controller then runs the
task again as a dead-letter requeue does: attempt back to 1, the ended run kept
in status.history, the idempotency record back to processing, and Tasks
mirroring the same key follow it. Only a Failed or DeadLettered task can be
retried; any other is refused (exit 1). The same change from Git
(spec.retryGeneration: N+1) is the GitOps form.`,
		Example: `  kubectl dtq retry report-2026-11
  kubectl dtq retry report-2026-11 && kubectl dtq wait report-2026-11 --timeout 10m
  kubectl dtq list --state DeadLettered -o name | xargs -n1 kubectl dtq retry`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.change(cmd.Context(), args[0], output, "retried", func(t *dtqv1alpha1.Task) (map[string]any, error) {
				if t.Status.State != dtqv1alpha1.TaskFailed && t.Status.State != dtqv1alpha1.TaskDeadLettered {
					state := string(t.Status.State)
					if state == "" {
						state = "not started"
					}
					return nil, fmt.Errorf("cannot retry task %s: it is %s; only a Failed or DeadLettered task can be retried", t.Name, state)
				}
				return map[string]any{"retryGeneration": t.Spec.RetryGeneration + 1}, nil
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json, yaml, name, jsonpath=TEMPLATE.")
	return cmd
}

// change reads the Task, asks spec for the spec fields to merge (or a
// refusal), and patches them conditionally on the Task's resourceVersion,
// reading again on a conflict, so the decision is made on the latest Task.
func (c *cli) change(ctx context.Context, arg, output, operation string, spec func(*dtqv1alpha1.Task) (map[string]any, error)) error {
	name, err := taskName(arg)
	if err != nil {
		return err
	}
	kc, err := c.objects()
	if err != nil {
		return err
	}
	p, err := printer(output, operation)
	if err != nil {
		return err
	}
	var changed *dtqv1alpha1.Task
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		t, err := kc.getTask(ctx, name)
		if err != nil {
			return err
		}
		fields, err := spec(t)
		if err != nil {
			return err
		}
		changed = &dtqv1alpha1.Task{}
		return kc.mergePatch(ctx, "tasks", name, map[string]any{
			"metadata": map[string]any{"resourceVersion": t.ResourceVersion},
			"spec":     fields,
		}, changed)
	})
	if err != nil {
		return err
	}
	return p.PrintObj(changed, c.streams.Out)
}
