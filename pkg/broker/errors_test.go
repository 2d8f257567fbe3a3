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

package broker

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// What a dead node, a restarting one and a closed connection answer is
// unreachable; an answer, even a refusal, is not, nor the caller's own
// deadline.
func TestUnreachable(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	wrongType := c.LPush(ctx, "k", "x").Err()
	s.Kill()
	dead := c.Get(ctx, "k").Err()
	dctx, cancel := context.WithTimeout(ctx, 0)
	defer cancel()
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"the server killed", dead, true},
		{"wrapped", fmt.Errorf("broker: get task x: %w", dead), true},
		{"EOF", io.ErrUnexpectedEOF, true},
		{"a reply", wrongType, false},
		{"an engine refusal", ErrQueueFull, false},
		{"nil", nil, false},
		{"the caller's deadline", fmt.Errorf("%w: %w", dctx.Err(), dead), false},
	} {
		if got := Unreachable(c.err); got != c.want {
			t.Errorf("%s (%v): Unreachable = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
