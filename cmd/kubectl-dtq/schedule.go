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
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/schedule"
)

// nextRunsShown is how many upcoming slots schedule get prints.
const nextRunsShown = 5

func newScheduleCommand(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "schedule",
		Aliases: []string{"schedules"},
		Short:   "TaskSchedules: list, get, trigger, suspend, resume",
		Long: `schedule works on TaskSchedule objects (taskschedules.dtq.dev) through the API
server: each slot of a schedule's cron expression runs one Task (docs/schedules.md).`,
		Example: `  kubectl dtq schedule list
  kubectl dtq schedule get nightly-report
  kubectl dtq schedule trigger nightly-report`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newScheduleListCommand(c), newScheduleGetCommand(c), newScheduleTriggerCommand(c),
		newScheduleSuspendCommand(c, true), newScheduleSuspendCommand(c, false))
	return cmd
}

func newScheduleListCommand(c *cli) *cobra.Command {
	var output string
	var all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List TaskSchedules with their last and next runs",
		Long: `list shows the TaskSchedules of the namespace (-A: of every namespace) with the
columns of kubectl get taskschedules.dtq.dev (-o wide adds missed and skipped slots).`,
		Example: `  kubectl dtq schedule list
  kubectl dtq schedule list -A -o wide`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.printList(cmd.Context(), "taskschedules", "TaskSchedules", metav1.ListOptions{}, &dtqv1alpha1.TaskScheduleList{}, output, all)
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List the TaskSchedules of every namespace.")
	cmd.Flags().StringVarP(&output, "output", "o", "", outputHelp)
	return cmd
}

func newScheduleGetCommand(c *cli) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "get SCHEDULE",
		Short: "Show a TaskSchedule: policies, counters, unfinished runs and the next five run times",
		Long: `get shows a TaskSchedule and the next five times its cron expression names in its
time zone (computed here with the controller's own code), after the later of now
and the last slot handled.`,
		Example: `  kubectl dtq schedule get nightly-report
  kubectl dtq schedule get nightly-report -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kc, err := c.objects()
			if err != nil {
				return err
			}
			ts, err := kc.getSchedule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if output != "" {
				return printObject(c.streams.Out, ts, output, "")
			}
			return describeSchedule(c.streams.Out, ts, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json, yaml, name, jsonpath=TEMPLATE (default: a description).")
	return cmd
}

func describeSchedule(w io.Writer, ts *dtqv1alpha1.TaskSchedule, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	zone := string(ts.Spec.TimeZone)
	if zone == "" {
		zone = "UTC"
	}
	line := func(k, f string, a ...any) { _, _ = fmt.Fprintf(tw, "%s:\t%s\n", k, fmt.Sprintf(f, a...)) }
	line("Name", "%s", ts.Name)
	line("Namespace", "%s", ts.Namespace)
	line("Schedule", "%s (%s)", ts.Spec.Schedule, zone)
	line("Suspended", "%t", ts.Spec.Suspend)
	line("Task", "queue %s, type %s", ts.Spec.Template.Queue, ts.Spec.Template.Type)
	policy, maxRuns := dtqv1alpha1.CatchUpRunLatest, int32(dtqv1alpha1.DefaultCatchUpMaxRuns)
	if ts.Spec.CatchUp != nil {
		policy, maxRuns = ts.Spec.CatchUp.Policy, ts.Spec.CatchUp.MaxRuns
	}
	deadline := "none"
	if ts.Spec.StartingDeadlineSeconds != nil {
		deadline = fmt.Sprintf("%ds", *ts.Spec.StartingDeadlineSeconds)
	}
	concurrency := ts.Spec.ConcurrencyPolicy
	if concurrency == "" {
		concurrency = dtqv1alpha1.ConcurrencyAllow
	}
	line("Policies", "concurrency %s, catch-up %s (max %d), starting deadline %s", concurrency, policy, maxRuns, deadline)
	st := &ts.Status
	line("Last run", "%s", formatTime(st.LastScheduleTime, now))
	line("Last success", "%s", formatTime(st.LastSuccessfulTime, now))
	line("Runs", "%d (missed %d, skipped %d)", st.Runs, st.MissedSlots, st.SkippedSlots)
	if st.LastSkipReason != "" {
		line("Last skipped", "%s (%s)", formatTime(st.LastSkippedSlot, now), st.LastSkipReason)
	}
	var active []string
	for _, r := range st.Active {
		active = append(active, r.Name)
	}
	line("Active", "%s", orNone(strings.Join(active, ", ")))
	for _, cond := range st.Conditions {
		line("Condition "+cond.Type, "%s %s: %s", cond.Status, cond.Reason, cond.Message)
	}
	runs, err := schedule.NextRuns(ts, now, nextRunsShown)
	if err != nil {
		line("Next runs", "none: %v", err)
		return tw.Flush()
	}
	if ts.Spec.Suspend {
		line("Next runs", "none while suspended; the schedule's times are:")
	} else {
		line("Next runs", "")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, t := range runs {
		_, _ = fmt.Fprintf(tw, "  %s\t(%s, in %s)\n", t.Format("2006-01-02 15:04 MST Mon"), t.UTC().Format(time.RFC3339),
			t.Sub(now).Round(time.Second))
	}
	return tw.Flush()
}

func formatTime(t *metav1.Time, now time.Time) string {
	if t == nil {
		return "never"
	}
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), now.Sub(t.Time).Round(time.Second))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func newScheduleTriggerCommand(c *cli) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "trigger SCHEDULE",
		Short: "Run a TaskSchedule once now, outside its slots (raises spec.triggerGeneration)",
		Long: `trigger raises the TaskSchedule's spec.triggerGeneration by one; the controller
then creates one Task per generation raised, <schedule>-manual-<N>, with the
idempotency key schedule/<uid>/manual/<N>, whatever the concurrency policy and
even while suspended (two triggers at once are two runs). The same change from
Git (spec.triggerGeneration: N+1) is the GitOps form.`,
		Example: `  kubectl dtq schedule trigger nightly-report`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.changeSchedule(cmd.Context(), args[0], output, "triggered", func(ts *dtqv1alpha1.TaskSchedule) map[string]any {
				return map[string]any{"triggerGeneration": ts.Spec.TriggerGeneration + 1}
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json, yaml, name, jsonpath=TEMPLATE.")
	return cmd
}

// newScheduleSuspendCommand is "schedule suspend" or "schedule resume": it sets spec.suspend.
func newScheduleSuspendCommand(c *cli, suspend bool) *cobra.Command {
	verb, done, does := "resume", "resumed", "Let a TaskSchedule run its slots again (slots that passed meanwhile stay skipped)"
	if suspend {
		verb, done, does = "suspend", "suspended", "Stop a TaskSchedule's runs (slots that pass are counted as skipped)"
	}
	var output string
	cmd := &cobra.Command{
		Use:     verb + " SCHEDULE",
		Short:   does,
		Long:    does + ". It sets the TaskSchedule's spec.suspend.",
		Example: fmt.Sprintf("  kubectl dtq schedule %s nightly-report", verb),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.changeSchedule(cmd.Context(), args[0], output, done, func(*dtqv1alpha1.TaskSchedule) map[string]any {
				return map[string]any{"suspend": suspend}
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json, yaml, name, jsonpath=TEMPLATE.")
	return cmd
}

// changeSchedule patches the spec fields spec returns, conditionally on the
// resourceVersion read, reading again on a conflict (two triggers at once
// raise the generation twice, and the controller runs each generation).
func (c *cli) changeSchedule(ctx context.Context, name, output, operation string, spec func(*dtqv1alpha1.TaskSchedule) map[string]any) error {
	kc, err := c.objects()
	if err != nil {
		return err
	}
	p, err := printer(output, operation)
	if err != nil {
		return err
	}
	changed := &dtqv1alpha1.TaskSchedule{}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ts, err := kc.getSchedule(ctx, name)
		if err != nil {
			return err
		}
		return kc.mergePatch(ctx, "taskschedules", name, map[string]any{
			"metadata": map[string]any{"resourceVersion": ts.ResourceVersion},
			"spec":     spec(ts),
		}, changed)
	})
	if err != nil {
		return err
	}
	return p.PrintObj(changed, c.streams.Out)
}

func (c *kubeClient) getSchedule(ctx context.Context, name string) (*dtqv1alpha1.TaskSchedule, error) {
	ts := &dtqv1alpha1.TaskSchedule{}
	return ts, c.rest.Get().Namespace(c.ns).Resource("taskschedules").Name(name).Do(ctx).Into(ts)
}
