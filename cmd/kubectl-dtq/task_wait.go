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
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// Exit codes of wait (and of every verb: 1 is any other error).
const (
	exitNotSucceeded = 2 // the task ended Failed, DeadLettered, Cancelled or Expired
	exitTimeout      = 3 // --timeout passed first
)

func newWaitCommand(c *cli) *cobra.Command {
	var timeout time.Duration
	var output string
	cmd := &cobra.Command{
		Use:   "wait TASK",
		Short: "Wait for a Task to finish; exit 0 only if it succeeded",
		Long: `wait watches a Task until it finishes and the controller has seen its latest
spec (a retry asked for just before is waited for, not mistaken for the run
that ended). Exit codes:

  0  the task Succeeded (prints "TASK Succeeded", or the Task with -o)
  1  wait itself failed: no such Task, no access, the Task was deleted
  2  the task ended Failed, DeadLettered, Cancelled or Expired (prints the
     state and the last error on stderr)
  3  --timeout passed first`,
		Example: `  kubectl dtq wait invoice-42 --timeout 5m
  kubectl dtq wait invoice-42 -o jsonpath='{.status.result}'
  kubectl dtq retry report-2026-11 && kubectl dtq wait report-2026-11`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := taskName(args[0])
			if err != nil {
				return err
			}
			kc, err := c.objects()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			t, err := waitFinished(ctx, kc, name)
			if err != nil {
				if ctx.Err() != nil && cmd.Context().Err() == nil {
					state := "not seen"
					if t != nil {
						state = string(t.Status.State)
					}
					return exitError{exitTimeout, fmt.Errorf("timed out after %v waiting for task %s (state %s)", timeout, name, state)}
				}
				return err
			}
			if i := t.Status.Idempotency; i != nil && i.RequestMatches != nil && !*i.RequestMatches && i.Duplicate {
				fmt.Fprintf(c.streams.ErrOut, "Warning: task %s replays task %s, whose idempotency key %q it shares but whose type or payload differ; its own payload never ran.\n",
					name, i.TaskID, i.Key)
			}
			if t.Status.State != dtqv1alpha1.TaskSucceeded {
				msg := fmt.Sprintf("task %s ended %s", name, t.Status.State)
				if t.Status.LastError != "" {
					msg += ": " + t.Status.LastError
				}
				return exitError{exitNotSucceeded, errors.New(msg)}
			}
			if output == "" {
				_, err := fmt.Fprintf(c.streams.Out, "task.dtq.dev/%s %s\n", name, t.Status.State)
				return err
			}
			return printObject(c.streams.Out, t, output, "")
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "Give up after this long (exit 3); 0 waits forever.")
	cmd.Flags().StringVarP(&output, "output", "o", "", "Print the succeeded Task: json, yaml, name, jsonpath=TEMPLATE.")
	return cmd
}

// finished says whether the status is terminal and reflects the latest spec.
func finished(t *dtqv1alpha1.Task) bool {
	return t.Status.State.Finished() && t.Status.ObservedGeneration == t.Generation
}

// waitFinished watches the Task until finished; on error it returns the last
// Task seen (nil if none).
func waitFinished(ctx context.Context, kc *kubeClient, name string) (*dtqv1alpha1.Task, error) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return kc.listTasks(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return kc.watchTasks(ctx, o)
		},
	}
	var last *dtqv1alpha1.Task
	exists := func(store cache.Store) (bool, error) {
		if _, ok, err := store.GetByKey(kc.ns + "/" + name); err != nil || !ok {
			return false, errors.Join(err, notFound("tasks", name))
		}
		return false, nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &dtqv1alpha1.Task{}, exists, func(e watch.Event) (bool, error) {
		t, ok := e.Object.(*dtqv1alpha1.Task)
		if !ok {
			return false, fmt.Errorf("unexpected watch event %s %T", e.Type, e.Object)
		}
		last = t
		if e.Type == watch.Deleted {
			return false, fmt.Errorf("task %s was deleted before it finished", name)
		}
		return finished(t), nil
	})
	return last, err
}
