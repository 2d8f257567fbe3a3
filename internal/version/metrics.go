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

package version

import "github.com/prometheus/client_golang/prometheus"

// BuildInfo is the gauge dtq_build_info{version, commit} = 1 that the manager
// and the API serve on /metrics: which build a scrape came from.
func BuildInfo() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "dtq_build_info",
		Help:        "The dtq build of this process: its version and commit as labels, value 1.",
		ConstLabels: prometheus.Labels{"version": Version, "commit": Commit},
	})
	g.Set(1)
	return g
}
