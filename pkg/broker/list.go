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
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The task index dtq:{ns/q}:tasks is a sorted set of task IDs scored by
// created_at (ms), written by the submit script (one ZADD per batch). Its
// memory is about 100 bytes per task, against the task hash's several hundred
// plus payload. It follows task retention without a sweeper of its own: each
// submit batch first drops the index's oldest entries whose task hash has
// expired (as many as it adds, plus one), and ListTasks drops any it meets.
// Tasks mostly finish in submission order, so the oldest entries are the
// first to go; one that outlives newer ones (a long delay) holds the gone
// entries behind it until it goes, or until a list passes over them.

// MaxListLimit is the largest page ListTasks returns.
const MaxListLimit = 500

// listScanBudget is how many index entries one ListTasks call examines at
// most beyond its limit, so a filter that matches little costs a bounded
// amount per page.
const listScanBudget = 1000

// ListOptions selects a page of a queue's tasks.
type ListOptions struct {
	State    State  // only tasks in this state; "" for all
	Limit    int    // 1..MaxListLimit; 0 means 50
	Continue string // the Continue of the previous page; "" for the first
}

// TaskList is one page of tasks, newest first (by created_at; tasks created in
// the same millisecond by task ID, descending).
type TaskList struct {
	// Tasks are the page's tasks without Payload and Result (GetTask has them).
	Tasks []TaskInfo
	// Continue, when not empty, fetches the next page. A page may hold fewer
	// than Limit tasks, even none, and still have a Continue when the State
	// filter skipped many tasks: follow Continue until it is empty.
	Continue string
}

// ListTasks returns a page of the queue's tasks, newest first.
// ErrInvalidRequest for a bad limit or continue token.
func (b *Broker) ListTasks(ctx context.Context, q QueueRef, opts ListOptions) (TaskList, error) {
	if opts.Limit == 0 {
		opts.Limit = 50
	}
	if opts.Limit < 1 || opts.Limit > MaxListLimit {
		return TaskList{}, &Error{Code: CodeInvalidRequest, Message: fmt.Sprintf("limit must be 1..%d", MaxListLimit)}
	}
	maxScore, after := "+inf", ""
	if opts.Continue != "" {
		var ok bool
		if maxScore, after, ok = decodeContinue(opts.Continue); !ok {
			return TaskList{}, &Error{Code: CodeInvalidRequest, Message: "invalid continue token"}
		}
	}
	k := keysFor(q)
	v, err := listScript.Run(ctx, b.rdb, k.guarded(k.taskIndex()), k.prefix, maxScore, after, opts.Limit,
		string(opts.State), listScanBudget+opts.Limit).Slice()
	if err != nil {
		return TaskList{}, fmt.Errorf("broker: list tasks of %s: %w", q, err)
	}
	items, _ := v[0].([]any)
	out := TaskList{Tasks: make([]TaskInfo, 0, len(items))}
	for _, h := range items {
		out.Tasks = append(out.Tasks, taskFromHash(q, hashMap(h)))
	}
	if next := str(v[1]); next != "" {
		out.Continue = encodeContinue(next, str(v[2]))
	}
	return out, nil
}

// A continue token is the score and ID of the last index entry a page
// examined, base64url-encoded as "<score>/<id>".
func encodeContinue(score, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(score + "/" + id))
}

func decodeContinue(tok string) (score, id string, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", "", false
	}
	score, id, ok = strings.Cut(string(b), "/")
	if _, err := strconv.ParseInt(score, 10, 64); err != nil || !ok || !validID(id) {
		return "", "", false
	}
	return score, id, true
}

// listScript returns a page of the task index, newest first, starting after
// the entry (max score, after id) of the previous page: the entries at that
// score that sort at or after the ID (members of equal score sort by bytes,
// and REV reverses that) were on earlier pages. It examines at most the budget
// of entries, returns the task hashes (payload left out) of those in the
// wanted state, and removes the entries whose task is gone.
//
// KEYS[1]        -> dtq:{<ns>/<q>}:tasks (the task index)
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> max score ("+inf" for the first page)
// ARGV[3]        -> after id ("" none)
// ARGV[4]        -> limit
// ARGV[5]        -> state ("" any)
// ARGV[6]        -> budget
//
// Returns {{task hash fields}...}, next score, next id} with next score ""
// when no entry follows.
var listScript = script(`
local idx, max, after, want = KEYS[1], ARGV[2], ARGV[3], ARGV[5]
local limit, budget = tonumber(ARGV[4]), tonumber(ARGV[6])
-- bytes_ge compares as the sorted set orders members (Lua's < follows the
-- server's locale).
local function bytes_ge(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x > y end
  end
  return #a >= #b
end
local offset = 0
if after ~= "" then
  for _, m in ipairs(redis.call("ZRANGE", idx, max, max, "BYSCORE")) do
    if bytes_ge(m, after) then offset = offset + 1 end
  end
end
local out, gone, scanned = {}, {}, 0
local last, lastScore = "", ""
while #out < limit and scanned < budget do
  local page = redis.call("ZRANGE", idx, max, "-inf", "BYSCORE", "REV", "LIMIT", offset + scanned,
    math.min(100, budget - scanned), "WITHSCORES")
  if #page == 0 then break end
  for i = 1, #page, 2 do
    local id = page[i]
    last, lastScore, scanned = id, page[i + 1], scanned + 1
    local h = redis.call("HGETALL", k_task(id))
    if #h == 0 then
      gone[#gone + 1] = id
    else
      local fields, state = {}, nil
      for j = 1, #h, 2 do
        if h[j] == "state" then state = h[j + 1] end
        if h[j] ~= "payload" then fields[#fields + 1] = h[j]; fields[#fields + 1] = h[j + 1] end
      end
      if want == "" or state == want then out[#out + 1] = fields end
    end
    if #out == limit or scanned == budget then break end
  end
end
if #gone > 0 then redis.call("ZREM", idx, unpack(gone)) end
local more = last ~= "" and #redis.call("ZRANGE", idx, max, "-inf", "BYSCORE", "REV", "LIMIT", offset + scanned - #gone, 1) > 0
if not more then return {out, "", ""} end
return {out, lastScore, last}
`)

// Queues returns the names of the namespace's queues (those EnsureQueue
// wrote and whose config still exists), sorted; it forgets the names whose
// config is gone (a deleted Queue).
func (b *Broker) Queues(ctx context.Context, namespace string) ([]string, error) {
	set := namespaceQueues(namespace)
	names, err := b.rdb.SMembers(ctx, set).Result()
	if err != nil {
		return nil, fmt.Errorf("broker: list queues of %s: %w", namespace, err)
	}
	exists := make([]*redis.IntCmd, len(names))
	if _, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range names {
			exists[i] = p.Exists(ctx, keysFor(QueueRef{Namespace: namespace, Name: n}).config())
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("broker: list queues of %s: %w", namespace, err)
	}
	out := make([]string, 0, len(names))
	var gone []any
	for i, n := range names {
		if exists[i].Val() == 1 {
			out = append(out, n)
		} else {
			gone = append(gone, n)
		}
	}
	if len(gone) > 0 {
		b.rdb.SRem(ctx, set, gone...)
	}
	slices.Sort(out)
	return out, nil
}
