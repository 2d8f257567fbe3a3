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

package httpapi

import (
	"fmt"
	"testing"

	"github.com/dtq-dev/dtq/pkg/broker"
)

func TestParsePosition(t *testing.T) {
	for in, want := range map[string]position{
		"0":                 {entry: "0-0", index: -1},
		"1714564800000-0":   {entry: "1714564800000-0", index: -1},
		"1714564800000-3:7": {entry: "1714564800000-3", index: 7},
	} {
		if got, ok := parsePosition(in); !ok || got != want {
			t.Errorf("parsePosition(%q) = %+v %v, want %+v", in, got, ok, want)
		}
	}
	if s := (position{entry: "5-1", index: 2}).String(); s != "5-1:2" {
		t.Errorf("position string %q", s)
	}
	for _, bad := range []string{"", "now", "1714564800000", "1-x", "1-2:", "1-2:-1", "1-2:x", "$"} {
		if _, ok := parsePosition(bad); ok {
			t.Errorf("parsePosition(%q) accepted", bad)
		}
	}
}

func TestEntryOrder(t *testing.T) {
	for id, before := range map[string]string{"5-3": "5-2", "5-0": "4-18446744073709551615", "0-0": "0-0"} {
		if got := entryBefore(id); got != before {
			t.Errorf("entryBefore(%s) = %s, want %s", id, got, before)
		}
	}
	if !entryLess("9-5", "10-0") || entryLess("10-0", "9-5") || !entryLess("10-1", "10-2") || entryLess("10-2", "10-2") {
		t.Error("entryLess does not order stream IDs numerically")
	}
}

// Events of one stream entry are numbered 0, 1, ... within it.
func TestIndexed(t *testing.T) {
	evs := []broker.Event{{ID: "1-0"}, {ID: "1-0"}, {ID: "1-0"}, {ID: "2-0"}, {ID: "3-0"}, {ID: "3-0"}}
	want := []int{0, 1, 2, 0, 0, 1}
	for i, ev := range indexed(evs) {
		if ev.index != want[i] {
			t.Errorf("event %d of entry %s has index %d, want %d", i, ev.ID, ev.index, want[i])
		}
	}
}

// The hub's buffer keeps the last hubBuffer events, cut at an entry
// boundary; a stream behind it is told to read Redis itself (a resync).
func TestHubBuffer(t *testing.T) {
	h := newHubs(nil, nil)
	hb := &hub{wake: make(chan struct{})}
	if _, _, _, ok := h.since(hb, position{entry: "0-0", index: -1}); ok {
		t.Fatal("a hub that has not found the stream's end served a stream")
	}
	h.reset(hb, "1-0")
	wake, _, _, _ := h.since(hb, position{entry: "1-0", index: -1})
	// Entry 2-0 holds three events, then one event per entry 3-0 ... .
	h.publish(hb, []broker.Event{{ID: "2-0", TaskID: "a"}, {ID: "2-0", TaskID: "b"}, {ID: "2-0", TaskID: "c"}})
	select {
	case <-wake:
	default:
		t.Fatal("publish did not wake the streams")
	}
	_, evs, last, ok := h.since(hb, position{entry: "2-0", index: 0})
	if !ok || last != "2-0" || len(evs) != 2 || evs[0].TaskID != "b" || evs[1].index != 2 {
		t.Fatalf("since 2-0:0 = %+v last %s ok %v, want b and c of 2-0", evs, last, ok)
	}
	if _, evs, _, _ := h.since(hb, position{entry: "2-0", index: -1}); len(evs) != 0 {
		t.Fatalf("since the whole of 2-0: %+v, want none", evs)
	}
	var more []broker.Event
	for i := range hubBuffer - 2 {
		more = append(more, broker.Event{ID: fmt.Sprintf("%d-0", i+3)})
	}
	h.publish(hb, more) // one event over: the whole of entry 2-0 goes
	if hb.base != "2-0" || len(hb.buf) != hubBuffer-2 {
		t.Fatalf("after trimming: base %s, %d events", hb.base, len(hb.buf))
	}
	for _, p := range []position{{entry: "1-0", index: -1}, {entry: "2-0", index: 1}} {
		if _, _, _, ok := h.since(hb, p); ok {
			t.Errorf("since %s served from a buffer that starts after 2-0", p)
		}
	}
	if _, evs, _, ok := h.since(hb, position{entry: "2-0", index: -1}); !ok || len(evs) != hubBuffer-2 || evs[0].ID != "3-0" {
		t.Errorf("since 2-0: %d events from %v, ok %v", len(evs), evs[0].ID, ok)
	}
}
