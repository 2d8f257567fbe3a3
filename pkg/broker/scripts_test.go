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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// The Lua key builders are rendered from keys.go: run in Redis, they build
// exactly the names the Go builders do.
func TestLuaKeysMatchGo(t *testing.T) {
	rdb := redistest.Start(t).Client()
	k := keysFor(QueueRef{Namespace: "ns", Name: "q"})
	got, err := rdb.Eval(ctx, luaKeys()+`return {k_task("t1"), k_result("t1"), k_idem("i1"), k_stream(7), K_EVENTS, K_CONFIG, K_DEADLETTER, K_STATS, GROUP}`,
		nil, k.prefix).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{k.task("t1"), k.result("t1"), k.idempotency("i1"), k.stream(7), k.events(), k.config(), k.deadLetter(), k.stats(), group}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Lua key builders (-Go +Lua):\n%s", d)
	}
}

// batchBody refuses a batch script whose unpack line does not name exactly
// its item width, one without such a line, and one reading an item argument
// by position.
func TestBatchBodyChecksWidth(t *testing.T) {
	unpack := func(names ...string) string {
		return "local a = 4 + W * i\nlocal " + strings.Join(names, ", ") + " = unpack(ARGV, a, a + W - 1)\n"
	}
	cases := map[string]struct {
		width  int
		body   string
		panics bool
	}{
		"names match the width":  {width: 3, body: unpack("x", "y", "z")},
		"one name too many":      {width: 2, body: unpack("x", "y", "z"), panics: true},
		"one name too few":       {width: 4, body: unpack("x", "y", "z"), panics: true},
		"positional reads":       {width: 2, body: "local x, y = ARGV[a], ARGV[a + 1]\n", panics: true},
		"two unpack lines":       {width: 1, body: unpack("x") + unpack("y"), panics: true},
		"positional read beside": {width: 1, body: unpack("x") + "local y = ARGV[a + 1]\n", panics: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); (r != nil) != c.panics {
					t.Errorf("panic %v, want panic %v", r, c.panics)
				}
			}()
			batchBody(c.width, c.body)
		})
	}
}
