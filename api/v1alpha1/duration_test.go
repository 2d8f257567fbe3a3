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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

func TestDurationJSON(t *testing.T) {
	for name, tc := range map[string]struct {
		in        string
		want      time.Duration
		malformed string
	}{
		"duration":        {in: `"1h30m"`, want: 90 * time.Minute},
		"zero":            {in: `"0s"`},
		"negative":        {in: `"-1h"`, want: -time.Hour},
		"not a duration":  {in: `"banana"`, malformed: `"banana"`},
		"overflow":        {in: `"9999999999h"`, malformed: `"9999999999h"`},
		"not even string": {in: `42`, malformed: `42`},
	} {
		t.Run(name, func(t *testing.T) {
			var d Duration
			if err := json.Unmarshal([]byte(tc.in), &d); err != nil {
				t.Fatalf("Unmarshal(%s): %v", tc.in, err)
			}
			if d.Duration != tc.want || d.Malformed() != tc.malformed {
				t.Fatalf("Unmarshal(%s) = (%v, %q), want (%v, %q)", tc.in, d.Duration, d.Malformed(), tc.want, tc.malformed)
			}
			out, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if tc.malformed != "" && string(out) != tc.in {
				t.Fatalf("Marshal = %s, want the malformed value back: %s", out, tc.in)
			}
		})
	}
}

// TestQueueListDecodesAroundMalformedDuration decodes a list the way the
// manager's informer does (the scheme's codec): one Queue with a malformed
// duration must not make the whole list fail.
func TestQueueListDecodesAroundMalformedDuration(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	list := `{"apiVersion":"dtq.dev/v1alpha1","kind":"QueueList","metadata":{},"items":[
		{"apiVersion":"dtq.dev/v1alpha1","kind":"Queue","metadata":{"name":"bad","namespace":"a"},"spec":{"idempotencyTTL":"banana","retry":{"maxDelay":"-1h"}}},
		{"apiVersion":"dtq.dev/v1alpha1","kind":"Queue","metadata":{"name":"good","namespace":"a"},"spec":{"idempotencyTTL":"2h"}}]}`
	obj, _, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode([]byte(list), nil, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	items := obj.(*QueueList).Items
	if len(items) != 2 || items[1].Spec.IdempotencyTTL.Duration != 2*time.Hour {
		t.Fatalf("decoded %+v", items)
	}
	got := items[0].Spec.DurationErrors()
	want := []string{
		`spec.retry.maxDelay: -1h0m0s is outside 10ms..24h0m0s`,
		`spec.idempotencyTTL: "banana" is not a duration such as 30s or 1h30m`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("DurationErrors (-want +got):\n%s", diff)
	}
	if errs := items[1].Spec.DurationErrors(); len(errs) != 0 {
		t.Fatalf("good Queue: %v", errs)
	}
}

func TestDurationErrorsBounds(t *testing.T) {
	for _, b := range QueueDurationBounds {
		t.Run(b.Path, func(t *testing.T) {
			for _, d := range []time.Duration{b.Min - time.Millisecond, b.Max + time.Millisecond} {
				s := QueueSpec{}
				*s.durationFields()[b.Path] = NewDuration(d)
				if errs := s.DurationErrors(); len(errs) != 1 || !strings.HasPrefix(errs[0], b.Path+":") {
					t.Errorf("%s=%v: errors %v, want one naming the field", b.Path, d, errs)
				}
			}
			for _, d := range []time.Duration{b.Min, b.Max} {
				s := QueueSpec{}
				*s.durationFields()[b.Path] = NewDuration(d)
				if errs := s.DurationErrors(); len(errs) != 0 {
					t.Errorf("%s=%v: unexpected errors %v", b.Path, d, errs)
				}
			}
		})
	}
}
