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

package worker

import (
	"context"
	"fmt"
	"testing"
)

func TestTypeLabels(t *testing.T) {
	mux := NewMux()
	l := newTypeLabels(mux)
	mux.HandleFunc("late", func(context.Context, *Task) (any, error) { return nil, nil }) // after NewServer, as cmd/worker does
	if got := []string{l.of("late"), l.of("nope")}; got[0] != "late" || got[1] != OtherTaskTypes {
		t.Fatalf("Mux labels %v", got)
	}

	open := newTypeLabels(HandlerFunc(func(context.Context, *Task) (any, error) { return nil, nil }))
	for i := range maxTypeLabels {
		if got := open.of(fmt.Sprint(i)); got != fmt.Sprint(i) {
			t.Fatalf("type %d labelled %q", i, got)
		}
	}
	if got := open.of("one-too-many"); got != OtherTaskTypes {
		t.Fatalf("type past the cap labelled %q", got)
	}
	if got := open.of("0"); got != "0" {
		t.Fatalf("a type seen before the cap labelled %q", got)
	}
}
