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

package apiconv

import (
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// History converts a queue's history samples.
func History(q broker.QueueRef, samples []broker.HistorySample) client.QueueHistory {
	out := client.QueueHistory{Namespace: q.Namespace, Queue: q.Name, Samples: make([]client.HistorySample, len(samples))}
	for i, s := range samples {
		out.Samples[i] = client.HistorySample{Time: s.At, Queued: s.Queued, InFlight: s.InFlight, Scheduled: s.Scheduled,
			DeadLettered: s.DeadLettered, Submitted: s.Submitted, Succeeded: s.Succeeded, Failed: s.Failed, Retries: s.Retries}
	}
	return out
}
