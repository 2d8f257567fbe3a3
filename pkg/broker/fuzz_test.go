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
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// Arbitrary key and payload bytes never panic, never write outside the queue's
// key namespace, and either submit or return a typed *Error.
func FuzzSubmit(f *testing.F) {
	for _, s := range []struct{ key, payload string }{
		{"", `{}`},
		{"k", `{"a":1}`},
		{"}", `{"a":"}"}`},
		{"{other}", `{"x":[1,2,3]}`},
		{"a:b:c", `[1]`},
		{"\x00\xff\n", `{`},
		{"../../etc", `null`},
		{"*", `{"deep":{"deeper":{}}}`},
		{strings.Repeat("k", 257), `{}`},
		{"dtq:{ns/other}:task:1", `"str"`},
	} {
		f.Add(s.key, []byte(s.payload))
	}
	srv := redistest.Start(f)
	rdb := srv.Client()
	b := New(rdb, WithClock(newFakeClock(time.Unix(1_800_000_000, 0))))
	q := QueueRef{Namespace: "fz", Name: "q"}
	cfg := DefaultQueueConfig()
	cfg.MaxPayloadBytes = 1024
	if err := b.EnsureQueue(ctx, q, cfg); err != nil {
		f.Fatal(err)
	}
	prefix := KeyPrefix(q)
	f.Fuzz(func(t *testing.T, key string, payload []byte) {
		r, err := b.Submit(ctx, q, SubmitRequest{Type: "fuzz", IdempotencyKey: key, Payload: payload})
		var be *Error
		switch {
		case err == nil:
			if r.Task.ID == "" {
				t.Fatalf("submitted without an id: %+v", r)
			}
		case !errors.As(err, &be):
			t.Fatalf("untyped error %v", err)
		}
		iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			if !strings.HasPrefix(iter.Val(), prefix) && iter.Val() != namespaceQueues(q.Namespace) { // EnsureQueue's registry
				t.Fatalf("key %q outside %q", iter.Val(), prefix)
			}
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
	})
}
