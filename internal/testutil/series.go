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

package testutil

import (
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// Series flattens metric families to "name{label=value,...}" -> value for the
// families whose name starts with prefix and the series of namespace ns (any
// namespace when ns is ""), the namespace label left out and the other labels
// sorted. A histogram gives name_count and name_sum.
func Series(fams []*dto.MetricFamily, prefix, ns string) map[string]float64 {
	out := map[string]float64{}
	for _, mf := range fams {
		name := mf.GetName()
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			inNS := ns == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" {
					inNS = l.GetValue() == ns
					continue
				}
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			if !inNS {
				continue
			}
			slices.Sort(labels)
			ls := "{" + strings.Join(labels, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"+ls] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"+ls] = m.GetHistogram().GetSampleSum()
			case dto.MetricType_COUNTER:
				out[name+ls] = m.GetCounter().GetValue()
			default:
				out[name+ls] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}
