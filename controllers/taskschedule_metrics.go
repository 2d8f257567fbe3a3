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

package controllers

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// The per-schedule series (docs/metrics.md), labelled namespace and schedule.
var (
	scheduleLabels = []string{"namespace", "schedule"}

	scheduleRunsDesc = prometheus.NewDesc("dtq_schedule_runs_total",
		"Slots of the TaskSchedule that ran (status.runs).", scheduleLabels, nil)
	scheduleMissedDesc = prometheus.NewDesc("dtq_schedule_missed_slots_total",
		"Late slots not run: older than startingDeadlineSeconds, or not picked by the catch-up policy (status.missedSlots).",
		scheduleLabels, nil)
	scheduleSkippedDesc = prometheus.NewDesc("dtq_schedule_skipped_slots_total",
		"Slots not run by choice: suspended, or concurrencyPolicy Forbid with a run unfinished (status.skippedSlots).",
		scheduleLabels, nil)
	scheduleActiveDesc = prometheus.NewDesc("dtq_schedule_active_runs",
		"Runs of the TaskSchedule whose Task is unfinished.", scheduleLabels, nil)
	scheduleNextDesc = prometheus.NewDesc("dtq_schedule_next_run_timestamp_seconds",
		"Unix time of the next slot; absent while the schedule is invalid.", scheduleLabels, nil)
	scheduleSuspendedDesc = prometheus.NewDesc("dtq_schedule_suspended",
		"1 when the TaskSchedule is suspended, else 0.", scheduleLabels, nil)

	scheduleDescs = []*prometheus.Desc{scheduleRunsDesc, scheduleMissedDesc, scheduleSkippedDesc, scheduleActiveDesc,
		scheduleNextDesc, scheduleSuspendedDesc}
)

// scheduleCollector collects the TaskSchedules' status counters on each
// scrape, in the elected leader. The counters are status fields, so they are
// the schedule's totals whichever manager handled the slots, and survive
// restarts.
type scheduleCollector struct {
	reader client.Reader
}

// newScheduleCollector is the manager's collector of per-schedule series.
func newScheduleCollector(reader client.Reader, elected <-chan struct{}) prometheus.Collector {
	c := &scheduleCollector{reader: reader}
	return &electedCollector{descs: scheduleDescs, elected: elected, collect: c.collect}
}

func (c *scheduleCollector) collect(ctx context.Context, ch chan<- prometheus.Metric) {
	var list dtqv1alpha1.TaskScheduleList
	if err := c.reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(scheduleRunsDesc, err)
		return
	}
	for i := range list.Items {
		ts := &list.Items[i]
		lv := []string{ts.Namespace, ts.Name}
		emit(ch, scheduleRunsDesc, prometheus.CounterValue, float64(ts.Status.Runs), lv)
		emit(ch, scheduleMissedDesc, prometheus.CounterValue, float64(ts.Status.MissedSlots), lv)
		emit(ch, scheduleSkippedDesc, prometheus.CounterValue, float64(ts.Status.SkippedSlots), lv)
		emit(ch, scheduleActiveDesc, prometheus.GaugeValue, float64(ts.Status.ActiveCount), lv)
		suspended := 0.0
		if ts.Spec.Suspend {
			suspended = 1
		}
		emit(ch, scheduleSuspendedDesc, prometheus.GaugeValue, suspended, lv)
		if ts.Status.NextScheduleTime != nil {
			emit(ch, scheduleNextDesc, prometheus.GaugeValue, float64(ts.Status.NextScheduleTime.Unix()), lv)
		}
	}
}
