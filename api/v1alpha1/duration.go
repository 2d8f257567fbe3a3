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

package v1alpha1

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Duration is a metav1.Duration ("30s", "1h0m0s") that also decodes a value
// that is not a duration. The API server refuses such values (each Queue
// duration field has a CEL rule), but a Queue stored before those rules
// existed may still hold one; a metav1.Duration would fail to decode it, and
// with it the manager's whole list of Queues. Duration keeps the malformed
// value instead (Duration is then 0, Malformed returns it, and it is encoded
// back unchanged), so the controller flags that one Queue and serves the rest.
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:MaxLength=64
type Duration struct {
	Duration time.Duration `json:"-"`
	// malformed is the JSON text of a value that does not decode as a
	// duration; empty for a well-formed one.
	malformed string
}

// NewDuration returns the Duration d.
func NewDuration(d time.Duration) Duration { return Duration{Duration: d} }

// Malformed returns the stored JSON text when it is not a duration, else "".
func (d Duration) Malformed() string { return d.malformed }

// UnmarshalJSON decodes a duration string, or keeps a malformed value.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var md metav1.Duration
	if err := md.UnmarshalJSON(b); err != nil {
		*d = Duration{malformed: string(b)}
		return nil //nolint:nilerr // kept as malformed so the list decodes; the controller reports it
	}
	*d = Duration{Duration: md.Duration}
	return nil
}

// MarshalJSON encodes the duration, or the malformed value as it was read.
func (d Duration) MarshalJSON() ([]byte, error) {
	if d.malformed != "" {
		return []byte(d.malformed), nil
	}
	return metav1.Duration{Duration: d.Duration}.MarshalJSON()
}

// Equal reports whether d and o hold the same value (go-cmp uses it).
func (d Duration) Equal(o Duration) bool { return d == o }

// IsZero lets `omitzero` leave out an unset Duration.
func (d Duration) IsZero() bool { return d.malformed == "" && d.Duration == 0 }

// String is the duration, or the malformed value.
func (d Duration) String() string {
	if d.malformed != "" {
		return d.malformed
	}
	return d.Duration.String()
}

// +kubebuilder:object:generate=false

// DurationBound is the range the API server accepts for one Queue duration
// field; the CRD's CEL rules spell the same bounds, and the envtest suite
// checks that they agree.
type DurationBound struct {
	// Path is the field's JSON path under the Queue, e.g. "spec.retry.maxDelay".
	Path     string
	Min, Max time.Duration
}

// QueueDurationBounds lists every duration field of a Queue with its bounds.
var QueueDurationBounds = []DurationBound{
	{"spec.visibilityTimeout", time.Second, time.Hour},
	{"spec.heartbeatInterval", 100 * time.Millisecond, 30 * time.Minute},
	{"spec.taskTimeout", time.Second, time.Hour},
	{"spec.retry.baseDelay", 10 * time.Millisecond, 24 * time.Hour},
	{"spec.retry.maxDelay", 10 * time.Millisecond, 24 * time.Hour},
	{"spec.idempotencyTTL", time.Second, 8760 * time.Hour},
	{"spec.taskRetention", time.Second, 8760 * time.Hour},
	{"spec.resultRetention", time.Second, 8760 * time.Hour},
	{"spec.scaling.scaleDownStabilization", 0, time.Hour},
	{"spec.durability.replicaAckTimeout", 10 * time.Millisecond, 30 * time.Second},
}

// durationFields maps each path of QueueDurationBounds to its field in s.
func (s *QueueSpec) durationFields() map[string]*Duration {
	return map[string]*Duration{
		"spec.visibilityTimeout":              &s.VisibilityTimeout,
		"spec.heartbeatInterval":              &s.HeartbeatInterval,
		"spec.taskTimeout":                    &s.TaskTimeout,
		"spec.retry.baseDelay":                &s.Retry.BaseDelay,
		"spec.retry.maxDelay":                 &s.Retry.MaxDelay,
		"spec.idempotencyTTL":                 &s.IdempotencyTTL,
		"spec.taskRetention":                  &s.TaskRetention,
		"spec.resultRetention":                &s.ResultRetention,
		"spec.scaling.scaleDownStabilization": &s.Scaling.ScaleDownStabilization,
		"spec.durability.replicaAckTimeout":   &s.Durability.ReplicaAckTimeout,
	}
}

// DurationErrors checks the duration fields of s against QueueDurationBounds,
// as the CRD's rules do, and returns one message per bad field. It matters
// for Queues stored before those rules existed: the API server refuses any
// new bad value. An unset field (zero, not malformed) takes its default and
// is not an error.
func (s *QueueSpec) DurationErrors() []string {
	fields := s.durationFields()
	var errs []string
	for _, b := range QueueDurationBounds {
		d := *fields[b.Path]
		switch {
		case d.Malformed() != "":
			errs = append(errs, fmt.Sprintf("%s: %s is not a duration such as 30s or 1h30m", b.Path, d.Malformed()))
		case d.IsZero():
		case d.Duration < b.Min || d.Duration > b.Max:
			errs = append(errs, fmt.Sprintf("%s: %s is outside %s..%s", b.Path, d.Duration, b.Min, b.Max))
		}
	}
	return errs
}

var (
	_ json.Marshaler   = Duration{}
	_ json.Unmarshaler = (*Duration)(nil)
)
