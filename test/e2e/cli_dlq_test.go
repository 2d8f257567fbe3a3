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

package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/pkg/client"
)

// Seven dead letters, read the ways a user reads them: curl pages of three
// (continue), kubectl dtq dlq list --limit 0 (all, paged underneath) and
// --limit 5; then kubectl dtq dlq requeue-all asks, runs every task again
// (each dead-letters again), and a requeue through the old fence finds
// nothing new to requeue; list --via-api -o json streams one document.
func testCLIDeadLetterPages(t *testing.T) {
	t.Parallel()
	ns := single.namespace(t, "e2e-cli-dlq-all")
	apiReadyQueue(t, ns, nil)
	var ids []string
	for range 7 {
		ids = append(ids, submitAPI(t, ns, "--type", demo.Fail, "--max-attempts", "1"))
	}
	for _, id := range ids {
		apiTaskState(t, ns, id, client.StatusDeadLettered)
	}
	slices.Reverse(ids) // newest first, as dead letters list

	tok := adminToken(t)
	var paged []string
	cont := ""
	for pages := 1; ; pages++ {
		r := call(t, tok, http.MethodGet, queuePath(ns, "q")+"/dead-letter?limit=3&continue="+url.QueryEscape(cont), nil)
		expect(t, "a page of dead letters", r, http.StatusOK, "")
		var l client.DeadLetterList
		must(t, json.Unmarshal(r.body, &l))
		for _, d := range l.Entries {
			paged = append(paged, d.TaskID)
		}
		if cont = l.Continue; cont == "" {
			break
		}
		if pages > 3 {
			t.Fatalf("more than 3 full pages of 3 for 7 dead letters: %v", paged)
		}
	}
	if !slices.Equal(paged, ids) {
		t.Fatalf("dead letters in pages of 3: %v, want %v", paged, ids)
	}
	expect(t, "a bad continue", call(t, tok, http.MethodGet, queuePath(ns, "q")+"/dead-letter?continue=x", nil), http.StatusBadRequest, client.CodeInvalidRequest)

	want(t, "dlq list --limit 0", dtq(t, ns, "dlq", "list", "q", "--limit", "0", "-o", "name"), 0, `^`+strings.Join(ids, `\n`)+`\n$`, `^$`)
	want(t, "dlq list --limit 5", dtq(t, ns, "dlq", "list", "q", "--limit", "5", "-o", "name"), 0, `^`+strings.Join(ids[:5], `\n`)+`\n$`, `^$`)

	no := dtqCmd(t, ns, "dlq", "requeue-all", "q")
	no.Stdin = strings.NewReader("n\n")
	want(t, "dlq requeue-all, answered no", runCmd(t, no), 1, `^$`, `Requeue the 7 dead-lettered tasks of queue `+ns+`/q\? \[y/N\] kubectl-dtq: not confirmed`)
	r := dtq(t, ns, "dlq", "requeue-all", "q", "--yes")
	want(t, "dlq requeue-all --yes", r, 0, `^7 requeued, 0 skipped \(entries through \d+-\d+\)\n$`, `^$`)
	through := strings.TrimSuffix(strings.TrimPrefix(strings.Fields(r.stdout)[6], "through "), ")")
	for _, id := range ids {
		if got := apiTaskState(t, ns, id, client.StatusDeadLettered); got.PreviousAttempts != 1 {
			t.Errorf("requeued task %s: %d previous attempts, want 1", id, got.PreviousAttempts)
		}
	}
	want(t, "dlq requeue-all through the old fence", dtq(t, ns, "dlq", "requeue-all", "q", "--yes", "--through", through), 0,
		`^0 requeued, 0 skipped \(entries through `+through+`\)\n$`, `^$`)
	expect(t, "requeue-all through a bad ID", call(t, tok, http.MethodPost, queuePath(ns, "q")+"/dead-letter/requeue?through=x", nil),
		http.StatusBadRequest, client.CodeInvalidRequest)

	r = dtq(t, ns, "list", "--via-api", "--queue", "q", "-o", "json")
	var l client.TaskList
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &l) != nil || l.Count != 7 || len(l.Tasks) != 7 {
		t.Fatalf("list --via-api -o json: want one TaskList of 7 tasks: %s", r)
	}
}
