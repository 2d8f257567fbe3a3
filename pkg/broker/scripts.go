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
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Lua scripts: every multi-step state change of the engine is one script, so no
// other client ever sees half of it. Each script's KEYS, ARGV and return value
// are documented above it, one per line, with the key's pattern (<ns>/<q> is
// the queue's namespace and name). Every script gets the queue's key prefix
// dtq:{<ns>/<q>}: as ARGV[1]; keys that depend on data read inside the script
// (the task of an idempotency record, a task's band stream) are built from it
// by the builders luaKeys (keys.go) renders. All such keys share the queue's
// hash tag, so a script still touches one cluster slot.
//
// A batch script takes a fixed number of ARGV per item, a Go constant
// (submitItemArgs, ...) that batchBody gives the script as W; the item loop
// unpacks one item's arguments into named locals in one line, which batchBody
// checks names exactly W of them; the Go side builds each item as an array of
// that constant's length from a [...] literal, so a missing or extra argument
// does not compile.
//
// Times are Unix milliseconds passed in by Go from the injected clock; nowtxt is
// the same instant as RFC 3339 for the idempotency record's updated_at.
//
// A task hash gets its retention TTL only when the task finishes (finish,
// exhaust, complete): retention counts from the end, so a task waiting in a long
// backlog, delayed, or retrying never expires before it has run. Its
// idempotency record is written without expiry and gets the queue's
// idempotency TTL at the same moment (idem_update), for the same reason: a
// record that expired while its task waited would let a second submission of
// the key become a second logical task.

// luaHead starts every script but submitBatchScript: the key builders, the
// task's packing and what flow control shares with the scripts.
var luaHead = luaKeys() + luaPackTask() + luaFlowState

// luaEngine is the engine's Lua helpers, after luaHead. try, finish,
// read_task and start_entry are assigned to the locals luaFlowState declares
// (flow control's library uses them).
var luaEngine = `
local TERMINAL = {Succeeded = true, Failed = true, DeadLettered = true, Cancelled = true, Expired = true}

-- count adds one to a field of the queue's counters (the stats hash, see
-- metrics.go). The counts are written once per script call, by flush_counts
-- when the script ends (see script in Go): one HINCRBY per field, not per task.
-- A failed HINCRBY loses that count, never the script's work.
local COUNTS = {}
local function count(field, n) COUNTS[field] = (COUNTS[field] or 0) + (n or 1) end
local function flush_counts()
  for f, n in pairs(COUNTS) do pcall(redis.call, "HINCRBY", K_STATS, f, n) end
end

-- try runs f(...) for one item of a batch: a Redis error fails that item only,
-- as {"err", message}.
function try(f, ...)
  local ok, r = pcall(f, ...)
  if ok then return r end
  return {"err", type(r) == "table" and r.err or tostring(r)}
end

local function event(typ, id, attempt, now)
  redis.call("XADD", K_EVENTS, "MAXLEN", "~", "` + eventsMaxLenText + `", "*",
    "type", typ, "task", id, "attempt", attempt, "at", now)
end

-- batch_event adds a task to its call's one event of type typ (TaskStarted,
-- TaskSucceeded: the hot path's events): flush_events (see script in Go)
-- writes one events entry per type when the script ends, listing the tasks
-- and their attempts ("tasks", "attempts"; a single task is written as a
-- plain event); ReadEvents expands it to one Event per task. As with the
-- submit batch's TaskQueued entry, a failed write loses the event, never the
-- script's work (the resync covers a lost event).
local BATCHED, BATCH_TYPES, BATCH_AT = {}, {}, nil
local function batch_event(typ, id, attempt, now)
  local b = BATCHED[typ]
  if not b then
    b = {ids = {}, attempts = {}}
    BATCHED[typ] = b
    BATCH_TYPES[#BATCH_TYPES + 1] = typ
  end
  b.ids[#b.ids + 1] = id
  b.attempts[#b.attempts + 1] = attempt
  BATCH_AT = BATCH_AT or now
end
local function flush_events()
  for _, typ in ipairs(BATCH_TYPES) do
    local b = BATCHED[typ]
    if #b.ids == 1 then
      pcall(redis.call, "XADD", K_EVENTS, "MAXLEN", "~", "` + eventsMaxLenText + `", "*",
        "type", typ, "task", b.ids[1], "attempt", b.attempts[1], "at", BATCH_AT)
    else
      pcall(redis.call, "XADD", K_EVENTS, "MAXLEN", "~", "` + eventsMaxLenText + `", "*",
        "type", typ, "tasks", table.concat(b.ids, " "), "attempts", table.concat(b.attempts, " "), "at", BATCH_AT)
    end
  end
end

local function record(id, state, nowtxt)
  return '{"task_id":"' .. id .. '","state":"' .. state .. '","updated_at":"' .. nowtxt .. '"}'
end

-- task_id is the task ID of a task hash's key (k_task(id)).
local TASK_ID_AT = #k_task("") + 1
local function task_id(tk) return string.sub(tk, TASK_ID_AT) end

-- task_type reads a task's type.
local function task_type(tk) return redis.call("HGET", tk, "type") end

local TASK_TTL -- the queue's task retention, read on first use
local function task_ttl()
  TASK_TTL = TASK_TTL or redis.call("HGET", K_CONFIG, "task_ttl_ms") or "604800000"
  return TASK_TTL
end

local IDEM_TTL -- the queue's idempotency TTL, read on first use
local function idem_ttl()
  IDEM_TTL = IDEM_TTL or redis.call("HGET", K_CONFIG, "idem_ttl_ms") or "86400000"
  return IDEM_TTL
end

-- idem_update moves the task's idempotency record to the terminal state
-- (completed or failed) with SET XX (the seed: only if it exists), and only
-- while the record still names this task. The record had no expiry while the
-- task was not terminal; it now gets the idempotency TTL, counted from the end
-- (the seed's KEEPTTL kept the TTL set at acquisition, which a long delay,
-- backlog or retries could outlast).
local function idem_update(ikey, id, state, nowtxt)
  if not ikey or ikey == "" then return end
  local rk = k_idem(ikey)
  local cur = redis.call("GET", rk)
  if not cur then return end
  local ok, rec = pcall(cjson.decode, cur)
  if not ok or rec.task_id ~= id then return end
  redis.call("SET", rk, record(id, state, nowtxt), "XX", "PX", idem_ttl())
end

-- finish ends a task in a terminal state that maps to the record's "failed"
-- (Cancelled, Expired): hash (its payload dropped: the task never runs
-- again), event, idempotency record.
function finish(id, state, evtype, attempt, ikey, now, nowtxt)
  local tk = k_task(id)
  redis.call("HSET", tk, "state", state, "finished_at", now, "payload", "")
  redis.call("PEXPIRE", tk, task_ttl())
  event(evtype, id, attempt, now)
  idem_update(ikey, id, "failed", nowtxt)
  count("finished:" .. state)
end

-- exhaust ends a task whose attempts are used up: DeadLettered (with a
-- dead-letter entry) when the queue has a dead-letter queue, else Failed.
-- Returns that state.
local function exhaust(id, attempt, ikey, lasterr, class, now, nowtxt)
  local tk = k_task(id)
  local typ = task_type(tk)
  local cfg = redis.call("HMGET", K_CONFIG, "dlq", "dlq_maxlen")
  redis.call("HSET", tk, "last_error", lasterr, "error_class", class)
  if cfg[1] == "1" then
    redis.call("HSET", tk, "state", "DeadLettered", "finished_at", now)
    redis.call("PEXPIRE", tk, task_ttl())
    event("TaskDeadLettered", id, attempt, now)
    local eid = redis.call("XADD", K_DEADLETTER, "MAXLEN", "~", cfg[2] or "10000", "*",
      "task", id, "type", typ or "", "failed_at", now, "attempts", attempt,
      "error", lasterr, "class", class)
    redis.call("HSET", tk, "dlq", eid)
  else
    redis.call("HSET", tk, "state", "Failed", "finished_at", now)
    redis.call("PEXPIRE", tk, task_ttl())
    event("TaskFailed", id, attempt, now)
  end
  idem_update(ikey, id, "failed", nowtxt)
  local state = cfg[1] == "1" and "DeadLettered" or "Failed"
  count("finished:" .. state)
  return state
end
-- read_task reads a task hash into a table of its fields.
function read_task(tk)
  local flat, h = redis.call("HGETALL", tk), {}
  for i = 1, #flat, 2 do h[flat[i]] = flat[i + 1] end
  return h
end

-- start_done acknowledges and deletes a delivered entry start_entry does not
-- run, and returns {reason, the task packed}: h as read, or read again when
-- the task hash changed since (wrote).
local function start_done(reason, tk, h, wrote, stream, msgid)
  redis.call("XACK", stream, GROUP, msgid)
  redis.call("XDEL", stream, msgid)
  return {reason, pack_task(wrote and read_task(tk) or h)}
end

-- start_entry decides whether a delivered entry runs (original section 5,
-- "Pre-execution checks, in order" and "Duplicate absorption"); shared by
-- startBatchScript (reclaimed and explicitly started entries) and
-- readStartScript (new entries, started as they are read).
-- Returns {"run", the task packed (pack_task) as the start left it} or
-- {reason, the task packed}, the entry then being acknowledged and deleted;
-- reason is one of missing, terminal, retrying, cancelled, expired,
-- duplicate, exhausted. Starting the same delivery again with the same
-- worker (a client retry after a lost reply; for a reclaimed delivery only
-- at the same now: the same call sent twice) answers "run" again and writes
-- nothing. h0 is the task hash when the caller read it already (fc_claim).
--
-- A flow-controlled task (fq) that leaves Running here (a reclaimed attempt
-- cancelled, expired or exhausted) gives its concurrency slot back; its
-- crash redelivery keeps the slot and is charged to the rate limits.
function start_entry(tk, stream, msgid, entryAttempt, reclaimed, worker, now, nowtxt, h0)
  -- One read serves both the checks and the reply (the start's writes
  -- applied to h): a second read after the write would cost a call per task.
  local h = h0 or read_task(tk)
  local id, state, attempt, maxAttempts = task_id(tk), h.state, tonumber(h.attempt), tonumber(h.max_attempts)
  if reclaimed == "1" then count("redeliveries") end
  if not state then return start_done("missing", tk, h, false, stream, msgid) end
  if TERMINAL[state] then return start_done("terminal", tk, h, false, stream, msgid) end
  if state == "Retrying" then return start_done("retrying", tk, h, false, stream, msgid) end
  local slot = state == "Running" and h.fq == "1"
  if h.cancel_requested == "1" then
    finish(id, "Cancelled", "TaskCancelled", attempt, h.ikey, now, nowtxt)
    if slot then fc().release({id}) end
    return start_done("cancelled", tk, h, true, stream, msgid)
  end
  local expires = tonumber(h.expires_at) or 0
  if expires > 0 and tonumber(now) >= expires then
    finish(id, "Expired", "TaskExpired", attempt, h.ikey, now, nowtxt)
    if slot then fc().release({id}) end
    return start_done("expired", tk, h, true, stream, msgid)
  end
  -- absorb: a duplicate delivery (an older attempt's entry, a copy of a
  -- running task's entry) is acknowledged with a TaskDuplicateAbsorbed
  -- event; the task is unchanged.
  local absorb = false
  if state == "Queued" then
    if entryAttempt < attempt then absorb = true
    elseif entryAttempt > attempt then attempt = entryAttempt end
  elseif state == "Running" then
    -- The same worker starting the same entry again is a client retry whose
    -- first reply was lost: answer the same, write nothing. A reclaimed
    -- entry is such a retry only at the same now (the same call sent twice):
    -- a worker may reclaim its own entry later, which is a crash redelivery.
    if msgid == h.msg and worker == h.worker_id and (reclaimed ~= "1" or h.started_at == now) then
      return {"run", pack_task(h)}
    end
    -- Only a reclaimed copy of the very entry that is running is a crash
    -- redelivery; it counts as an attempt, bounded by max_attempts.
    if reclaimed ~= "1" or msgid ~= h.msg then
      absorb = true
    else
      attempt = attempt + 1
      if attempt > maxAttempts then
        exhaust(id, attempt - 1, h.ikey, "worker lost the task on every attempt (crash or visibility timeout)", "WorkerLost", now, nowtxt)
        if slot then fc().release({id}) end
        return start_done("exhausted", tk, h, true, stream, msgid)
      end
      if slot then fc().charge(h.fk or "") end
    end
  else
    absorb = true
  end
  if absorb then
    event("TaskDuplicateAbsorbed", id, entryAttempt, now)
    return start_done("duplicate", tk, h, false, stream, msgid)
  end
  local a = int(attempt)
  redis.call("HSET", tk, "state", "Running", "attempt", a, "started_at", now, "worker_id", worker, "msg", msgid)
  h.state, h.attempt, h.started_at, h.worker_id, h.msg = "Running", a, now, worker, msgid
  -- finished_at is only there after a retry, progress only after an attempt
  -- that reported some (it is the running attempt's); a delete is a write,
  -- so only then.
  if h.finished_at or h.progress then
    redis.call("HDEL", tk, "finished_at", "progress", "progress_at")
    h.finished_at, h.progress, h.progress_at = nil, nil, nil
  end
  batch_event("TaskStarted", id, a, now)
  return {"run", pack_task(h)}
end

-- start_reply is a read script's entry for a delivery start_entry answered
-- r: one that runs as one string, "band entry-id task-id attempt run
-- <the task packed>" (readEntries; Redis converts a table reply field by
-- field after seven lookups of the table's own), any other as
-- {band, entry id, task id, attempt, r}.
function start_reply(band, msgid, t, a, r)
  if r[1] == "run" then return band .. " " .. msgid .. " " .. t .. " " .. a .. " run " .. r[2] end
  return {band, msgid, t, a, r}
end

-- read_bands reads up to left new entries for consumer from KEYS[1..10]
-- (streams p0..p9), p9 first, each band with COUNT set to what is still
-- missing, and returns each(band, entry id, task id, attempt) per entry.
local function read_bands(consumer, left, each)
  local out = {}
  for band = 9, 0, -1 do
    -- XREADGROUP is a write (it moves entries to the PEL) and costs several
    -- times a read inside a script, so empty bands are skipped with XLEN.
    local r = redis.call("XLEN", KEYS[band + 1]) > 0 and
      redis.call("XREADGROUP", "GROUP", GROUP, consumer, "COUNT", left, "STREAMS", KEYS[band + 1], ">")
    if r then
      for _, e in ipairs(r[1][2]) do
        local f = e[2]
        local t, a = "", "1"
        for i = 1, #f, 2 do
          if f[i] == "t" then t = f[i + 1] elseif f[i] == "a" then a = f[i + 1] end
        end
        out[#out + 1] = each(band, e[1], t, a)
        left = left - 1
      end
    end
    if left <= 0 then break end
  end
  return out
end

-- last_ids returns the newest entry ID of KEYS[1..10] ("0-0" when empty), for
-- a blocking XREAD after them.
local function last_ids()
  local last = {}
  for band = 0, 9 do
    local r = redis.call("XREVRANGE", KEYS[band + 1], "+", "-", "COUNT", 1)
    last[band + 1] = r[1] and r[1][1] or "0-0"
  end
  return last
end
`

// luaLib is prepended to every script but submitBatchScript (which starts
// with luaKeys, luaFlowState and luaFlowEnqueueLazy) and the flow scripts
// (flowScript): the engine's helpers, and flow control's library built only
// when a call needs it (fc in luaFlowState).
var luaLib = luaHead + luaFlowLazy + luaEngine

// luaEnd ends every script of script and flowScript: after the body, which
// runs as a function, whatever return it takes, the counts and batched events
// it made (count and batch_event in luaLib) and its flow control work
// (nothing when it did none) are written.
const luaEnd = "\nend\nlocal reply = main()\nif FCL or FQ_ADDED ~= 0 then fc().flush() end\nflush_events()\nflush_counts()\nreturn reply\n"

// script builds a script from luaLib and body.
func script(body string) *redis.Script {
	return redis.NewScript(luaLib + "local function main()\n" + body + luaEnd)
}

// flowScript builds a script whose body uses flow control's library's parts
// directly (the flow scripts of flow_scripts.go): the library is defined at
// the top level, not built on demand.
func flowScript(body string) *redis.Script {
	return redis.NewScript(luaHead + luaEngine + luaFlowEager + "local function main()\n" + body + luaEnd)
}

// Arguments per item (ARGV) of the batch scripts.
const (
	submitItemArgs   = 1 // packed: submitItemFields
	startItemArgs    = 4
	completeItemArgs = 1 // packed: completeItemFields
	touchItemArgs    = 3
)

// itemUnpack is the line of a batch script that names one item's arguments:
// "local a, b, c = unpack(ARGV, a, a + W - 1)" with a the item's first index.
var itemUnpack = regexp.MustCompile(`local ([\w, ]+) =\s*unpack\(ARGV, a, a \+ W - 1\)`)

// itemPositional is an item argument read by position (ARGV[a + 9]).
var itemPositional = regexp.MustCompile(`ARGV\[a\b`)

// batchBody is body preceded by "local W = width", for a batch script whose
// items take width ARGV each. It panics (at package initialisation) unless
// the body has exactly one itemUnpack line naming width arguments and reads
// no item argument by position, so the width in Go and the names in Lua
// cannot disagree.
func batchBody(width int, body string) string {
	m := itemUnpack.FindAllStringSubmatch(body, -1)
	if len(m) != 1 || len(strings.Split(m[0][1], ",")) != width || itemPositional.MatchString(body) {
		panic(fmt.Sprintf("broker: a batch script must unpack its %d item arguments in one line, found %q", width, m))
	}
	return "local W = " + strconv.Itoa(width) + "\n" + body
}

// submitBatchScript ingests a batch of tasks, in order, each with the five
// cases of DESIGN section 4 exactly as if it were submitted alone: a later
// item sees what earlier ones wrote (a second submit of the same key gets
// "busy" with the first's task ID; the depth gate counts entries admitted
// earlier in the batch), and an item that is refused writes nothing.
//
// The depth gate counts every unfinished task: the streams' entries (queued
// and in flight) and the schedule's members (delayed and retrying), so a flood
// of delayed work cannot bypass backpressure. The idempotency record is written
// without expiry: it gets the idempotency TTL when its task ends (idem_update).
//
// KEYS[1]        -> dtq:{<ns>/<q>}:config
// KEYS[2]        -> dtq:{<ns>/<q>}:schedule
// KEYS[3..12]    -> dtq:{<ns>/<q>}:stream:p0 .. dtq:{<ns>/<q>}:stream:p9
// KEYS[13]       -> dtq:{<ns>/<q>}:tasks (the task index)
// per item i (from 0):
// KEYS[14+2i]    -> dtq:{<ns>/<q>}:task:<id>
// KEYS[15+2i]    -> dtq:{<ns>/<q>}:idempotency:<key> (KEYS[1] again without a key)
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> now, Unix ms
// ARGV[3]        -> now, RFC 3339 (nowtxt)
// per item i, ARGV[4+i]: the item packed (pack.go), submitItemFields fields:
// id             -> task id
// ikey           -> idempotency key ("" none)
// size           -> compact payload size, bytes
// prio           -> priority 0..9
// maxAttempts    -> max attempts ("0": the queue's default)
// timeout        -> timeout ms ("0": the queue's default)
// notBefore      -> not-before, Unix ms ("0": now)
// expires        -> expires-at, Unix ms ("0": never)
// chosen         -> "1": the caller chose the ID (so it may exist already); "0": fresh random (so it exists only when this call is sent twice)
// fromCR         -> "1": a Task CR submits it (the hash gets from_cr, which the orphan sweep reads); else "0"
// typ            -> task type
// payload        -> payload JSON
// meta           -> metadata object ("" none)
// trace          -> W3C traceparent ("" none; stored as the task's trace field)
// fkey           -> flow key ("" none; stored as fk)
// fp             -> request fingerprint (fingerprint.go; "" without a key; stored as fp)
//
// A keyed item whose record names a live task compares its fp with that
// task's: "1" matched, "0" did not, "" when either has none (a task of an
// older release). On a queue whose config has idem_mismatch "reject", a "0"
// is refused ("mismatch") before the replay or in-progress answer; otherwise
// the match rides in the answer.
//
// On a flow-controlled queue (the config's flow field is set) a queued task
// goes to its key's list instead of its band stream (fc_enqueue), and every
// new task gets fq ("flow task"); the depth gate counts the lists too.
//
// It also adds each item's answer to the queue's counters (dtq:{<ns>/<q>}:stats,
// one HINCRBY per kind of answer in the batch; see metrics.go); a submit naming
// an existing task's ID (a retry with the same ID) is not counted.
// Returns {"notfound"} (queue config missing: nothing written) or
// {"ok", {item reply}...} with one reply per item, one of
//
//	{"toolarge", limit}
//	{"dup", task id, HGETALL task, result|false}   same ID exists
//	{"dup", task id, HGETALL task, result|false, match}  a replay of a completed/failed record
//	{"busy", task id, match}                       record processing
//	{"mismatch", task id}                          match "0" on a queue that rejects mismatches; nothing written but the count
//	{"full", depth, limit}                         nothing written but the count
//	"new <state> <max attempts> <timeout ms>"      one string (itemReply); a second send of this call (see below) gets the same as a table
//	{"err", message}                               a Redis error in this item only
//
// Sent twice (go-redis re-sends a call whose reply it did not read: a read
// timeout, a dropped connection), it writes nothing the second time: an
// item with a random ID that exists (no key: the task hash; a key: its record
// names the ID) is answered "new" with the state, max attempts and timeout
// the first send gave it (TestScriptsSentTwice).
//
// It is the hot path. On Redis 7.0 a write from a script costs about 2 us on top
// of the command (the first one about 5 us), reads far less, so it writes only
// what the contract needs: record, stream entry (or schedule member) and task
// hash per task; the call, the config read, the depth gate's ten XLENs and
// ZCARD, and the TaskQueued event are paid once per batch (one events entry
// lists the batch's new tasks in a "tasks" field; ReadEvents expands it to one
// Event per task), and so is the task index (list.go): one ZADD of the batch's
// new tasks scored by created_at, after removing the index's oldest entries
// whose task hash is gone (as many as the batch adds, plus one), so the index
// holds about the tasks still retained.
// The task hash gets its retention TTL when the task finishes (finish, exhaust,
// complete), not here: retention counts from the end, so a task waiting in a
// long backlog or delayed past the retention never vanishes. It carries only
// the key builders and the helper it needs instead of luaLib.
var submitBatchScript = redis.NewScript(luaKeys() + luaFlowState + luaFlowEnqueueLazy + batchBody(submitItemArgs, `
local ITEM = "`+packFormat(submitItemFields)+`"
local function record(id, state, nowtxt)
  return '{"task_id":"' .. id .. '","state":"' .. state .. '","updated_at":"' .. nowtxt .. '"}'
end
local cfg = redis.call("HMGET", KEYS[1], "max_depth", "max_payload", "max_attempts", "timeout_ms", "flow", "idem_mismatch")
if not cfg[1] then return {"notfound"} end
local rejectMismatch = cfg[6] == "reject"
local maxDepth, maxPayload = tonumber(cfg[1]), tonumber(cfg[2])
local F = flow_parse(cfg[5]) -- flow control: queued tasks go to their key lists
local now, nowms, nowtxt = ARGV[2], tonumber(ARGV[2]), ARGV[3]
local depth -- read on first use, then counts the tasks this batch added
local queued = {} -- IDs of the new tasks, for the batch's one TaskQueued event

-- resent answers an item whose random ID exists already. Nothing else
-- writes a random ID, so this is the same call sent a second time (go-redis
-- re-sends a call whose reply it did not read): it answers as the first send
-- did and writes nothing, not even a count. A keyed item's record names its
-- ID; an item without a key has the hash to look at.
local function resent(tk, notBefore)
  local h = redis.call("HMGET", tk, "max_attempts", "timeout_ms")
  return {"new", notBefore ~= "0" and tonumber(notBefore) > nowms and "Pending" or "Queued", h[1], h[2]}
end

local function submit(tk, rk, a)
  local item = unpack(ARGV, a, a + W - 1)
  local _, id, ikey, size, prio, maxAttempts, timeout, notBefore, expires, chosen, fromCR, typ, payload, meta, trace, fkey, fp =
    struct.unpack(ITEM, item)
  if tonumber(size) > maxPayload then return {"toolarge", cfg[2]}, "refused:PAYLOAD_TOO_LARGE" end
  if (chosen == "1" or ikey == "") and redis.call("EXISTS", tk) == 1 then
    if chosen == "0" then return resent(tk, notBefore) end
    return {"dup", id, redis.call("HGETALL", tk), redis.call("GET", k_result(id))} -- a retry with the same ID: not counted
  end
  -- Claim the key or read who holds it, in one call (SET NX GET, Redis 7.0).
  -- A claim this item does not keep (a refusal below) is deleted again
  -- before the script ends, so a refused item writes nothing.
  local cur = false
  if ikey ~= "" then
    cur = redis.call("SET", rk, record(id, "processing", nowtxt), "NX", "GET")
    if cur then
      local ok, rec = pcall(cjson.decode, cur)
      if ok and type(rec) == "table" and rec.task_id == id and chosen == "0" and redis.call("EXISTS", tk) == 1 then
        return resent(tk, notBefore)
      end
      -- The record's task: its state says it exists (every task hash has one).
      local orig = ok and type(rec) == "table" and type(rec.task_id) == "string" and redis.call("HMGET", k_task(rec.task_id), "state", "fp")
      if orig and orig[1] then
        local match = ""
        if fp ~= "" and orig[2] then match = orig[2] == fp and "1" or "0" end
        if match == "0" and rejectMismatch then return {"mismatch", rec.task_id}, "refused:IDEMPOTENCY_KEY_MISMATCH" end
        if rec.state == "processing" then return {"busy", rec.task_id, match}, "refused:IDEMPOTENCY_IN_PROGRESS" end
        return {"dup", rec.task_id, redis.call("HGETALL", k_task(rec.task_id)), redis.call("GET", k_result(rec.task_id)), match}, "duplicate"
      end
      -- stale: its task is gone, so this is new work, and the key is this task's
      redis.call("SET", rk, record(id, "processing", nowtxt))
    end
  end
  if not depth then
    depth = redis.call("ZCARD", KEYS[2])
    for i = 3, 12 do depth = depth + redis.call("XLEN", KEYS[i]) end
    if F then depth = depth + (tonumber(redis.call("HGET", K_FS, "n")) or 0) + FQ_ADDED end
  end
  if depth >= maxDepth then
    if ikey ~= "" then redis.call("DEL", rk) end
    return {"full", depth, cfg[1]}, "refused:QUEUE_FULL"
  end

  if maxAttempts == "0" then maxAttempts = cfg[3] end
  if timeout == "0" then timeout = cfg[4] end
  local state, avail, msg = "Queued", now, ""
  if notBefore ~= "0" and tonumber(notBefore) > nowms then
    state, avail = "Pending", notBefore
    redis.call("ZADD", KEYS[2], notBefore, id)
  elseif F then
    fc().enqueue(F, prio, fkey, id, now)
  else
    msg = redis.call("XADD", KEYS[3 + tonumber(prio)], "*", "t", id, "a", "1")
  end
  depth = depth + 1
  -- Every field is its own, each under hash-max-listpack-value (64 bytes) for
  -- a typical task, so a small task's hash stays a listpack (see
  -- TestTaskHashStaysListpack). Fields at their default are left out (each
  -- costs a little): no ikey without a key, no expires_at without expiry,
  -- available_at only when it is not created_at, msg only for a stream entry,
  -- no meta or trace when empty (readers treat absent as such).
  local f = {"id", id, "type", typ, "payload", payload, "prio", prio, "state", state,
    "attempt", "1", "max_attempts", maxAttempts, "timeout_ms", timeout, "created_at", now}
  if ikey ~= "" then f[#f + 1] = "ikey"; f[#f + 1] = ikey end
  if expires ~= "0" then f[#f + 1] = "expires_at"; f[#f + 1] = expires end
  if fromCR == "1" then f[#f + 1] = "from_cr"; f[#f + 1] = "1" end
  if meta ~= "" then f[#f + 1] = "meta"; f[#f + 1] = meta end
  if trace ~= "" then f[#f + 1] = "trace"; f[#f + 1] = trace end
  if fkey ~= "" then f[#f + 1] = "fk"; f[#f + 1] = fkey end
  if fp ~= "" then f[#f + 1] = "fp"; f[#f + 1] = fp end
  if F then f[#f + 1] = "fq"; f[#f + 1] = "1" end
  if msg ~= "" then f[#f + 1] = "msg"; f[#f + 1] = msg elseif avail ~= now then f[#f + 1] = "available_at"; f[#f + 1] = avail end
  redis.call("HSET", tk, unpack(f))
  queued[#queued + 1] = id
  -- One string, not a table: Redis converts a table reply field by field
  -- after seven lookups of the table's own (err, ok, map, ...).
  return "new " .. state .. " " .. maxAttempts .. " " .. timeout, "accepted"
end

-- index_new trims the index's oldest entries whose task is gone, then adds
-- the batch's new tasks. One EXISTS of all the oldest answers the common
-- case (every one still retained); only when some are gone is each asked.
local function index_new()
  local old, tks = redis.call("ZRANGE", KEYS[13], 0, #queued), {}
  for i, id in ipairs(old) do tks[i] = k_task(id) end
  if #old > 0 and redis.call("EXISTS", unpack(tks)) < #old then
    local gone = {}
    for i, id in ipairs(old) do
      if redis.call("EXISTS", tks[i]) == 0 then gone[#gone + 1] = id end
    end
    redis.call("ZREM", KEYS[13], unpack(gone))
  end
  local z = {}
  for i, id in ipairs(queued) do z[2 * i - 1] = now; z[2 * i] = id end
  redis.call("ZADD", KEYS[13], unpack(z))
end

-- counts holds the queue's counters (see count in luaLib) by the field
-- submit names beside its reply.
local counts = {}
local out = {}
for i = 0, (#ARGV - 3) / W - 1 do
  local ok, r, f = pcall(submit, KEYS[14 + 2 * i], KEYS[15 + 2 * i], 4 + W * i)
  out[i + 1] = ok and r or {"err", type(r) == "table" and r.err or tostring(r)}
  if ok and f then counts[f] = (counts[f] or 0) + 1 end
end
-- A failure of the event, the index or a count must not fail tasks already
-- written: the resync covers a lost event, a task missing from the index is
-- only missing from lists, and a lost count is only a count.
if #queued > 0 then
  pcall(redis.call, "XADD", K_EVENTS, "MAXLEN", "~", "`+eventsMaxLenText+`", "*", "type", "TaskQueued", "tasks", table.concat(queued, " "), "attempt", 1, "at", now)
  pcall(index_new)
end
for f, n in pairs(counts) do pcall(redis.call, "HINCRBY", K_STATS, f, n) end
if FCL then FCL.flush_enqueue() end
return {"ok", out}
`))

// readScript delivers up to ARGV[3] new entries to a consumer, reading the bands
// p9 first with COUNT set to what is still missing (read_bands), so the total
// never exceeds the count and nothing is read that is not returned.
//
// KEYS[1..10]    -> dtq:{<ns>/<q>}:stream:p0 .. dtq:{<ns>/<q>}:stream:p9
// KEYS[11]       -> dtq:{<ns>/<q>}:paused
// KEYS[12]       -> dtq:{<ns>/<q>}:flow
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> consumer (worker id)
// ARGV[3]        -> count
//
// Returns {"paused"}, {"ok", {band, entry id, task id, attempt}...} or, when
// nothing was ready, {"empty", last entry id of p0..p9} so the caller can block
// with XREAD until any band gets a newer entry; {"flow"} on a flow-controlled
// queue, whose tasks start only through readStartScript's admission.
var readScript = script(`
local st = redis.call("MGET", KEYS[11], KEYS[12])
if st[1] then return {"paused"} end
if st[2] then return {"flow"} end
local out = read_bands(ARGV[2], tonumber(ARGV[3]), function(band, msgid, t, a)
  return {band, msgid, t, a}
end)
if #out > 0 then return {"ok", out} end
return {"empty", last_ids()}
`)

// readStartScript is readScript that also starts what it reads: each entry
// goes through start_entry (not reclaimed) exactly as startBatchScript would
// decide it, in the same call, saving the worker a round trip per task.
// Skipped entries (duplicate, cancelled, ...) are acknowledged and still count
// toward ARGV[3].
//
// On a flow-controlled queue (its flow key is set) the tasks are admitted
// from the key lists under the limits instead (fc_claim in flow_scripts.go),
// which may also answer {"again"} or {"wait", delay us, limit}.
//
// KEYS[1..10]    -> dtq:{<ns>/<q>}:stream:p0 .. dtq:{<ns>/<q>}:stream:p9
// KEYS[11]       -> dtq:{<ns>/<q>}:paused
// KEYS[12]       -> dtq:{<ns>/<q>}:flow
// KEYS[13]       -> dtq:{<ns>/<q>}:fc:mig
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> consumer
// ARGV[3]        -> count
// ARGV[4]        -> now, Unix ms
// ARGV[5]        -> now, RFC 3339
// ARGV[6]        -> worker id
// ARGV[7]        -> rate clock, Unix us ("": the Redis server's TIME; tests only)
//
// Returns {"paused"}, {"ok", {band, entry id, task id, attempt, start reply}...}
// with start_entry's reply (or {"err", message} for a Redis error in that entry
// only, the entry then staying pending) or {"empty", last entry ids} as
// readScript. An entry that runs comes as one string instead, its fields
// joined by spaces: "band entry-id task-id attempt run <the task packed>".
var readStartScript = script(`
local st = redis.call("MGET", KEYS[11], KEYS[12], KEYS[13])
if st[1] then return {"paused"} end
local consumer, count, now, nowtxt, worker = ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]
local out = {}
if st[2] then
  FLOW_CLOCK = ARGV[7]
  local r = fc().claim(st[2], st[3], consumer, count, worker, now, nowtxt)
  if not FLOW_CFG.off then return r end
  -- Flow control was removed: the key lists first (no limits), then the
  -- streams; once the lists are empty the queue is a plain one again.
  out = r[1] == "ok" and r[2] or {}
  if #out >= count then return {"ok", out} end
  if (tonumber(redis.call("HGET", K_FS, "n")) or 0) + FQ_ADDED <= 0 then fc().remove() end
  count = count - #out
end
for _, e in ipairs(read_bands(consumer, count, function(band, msgid, t, a)
  return start_reply(band, msgid, t, a, try(start_entry, k_task(t), KEYS[band + 1], msgid, tonumber(a), "0", worker, now, nowtxt))
end)) do out[#out + 1] = e end
if #out > 0 then return {"ok", out} end
return {"empty", last_ids()}
`)

// startBatchScript decides, for each delivery of a batch in order, whether it
// runs (original section 5, "Pre-execution checks, in order" and "Duplicate
// absorption"), exactly as if each were started alone.
//
// per item i (from 0):
// KEYS[1+2i]     -> dtq:{<ns>/<q>}:task:<id>
// KEYS[2+2i]     -> dtq:{<ns>/<q>}:stream:p<band> (the entry's)
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> now, Unix ms
// ARGV[3]        -> now, RFC 3339
// ARGV[4]        -> rate clock, Unix us ("": the Redis server's TIME; tests only), for a crash redelivery's charge (fc_charge)
// per item i, startItemArgs from ARGV[5+W*i], unpacked as:
// msgid          -> entry id
// entryAttempt   -> the entry's attempt
// reclaimed      -> "1": a reclaimed entry; "0": read
// worker         -> worker id
//
// Returns one reply per item: start_entry's (see luaLib), or {"err", message}
// for a Redis error in that item only.
var startBatchScript = script(batchBody(startItemArgs, `
local now, nowtxt = ARGV[2], ARGV[3]
FLOW_CLOCK = ARGV[4]
local out = {}
for i = 0, math.floor(#KEYS / 2) - 1 do
  local a = 5 + W * i
  local msgid, entryAttempt, reclaimed, worker = unpack(ARGV, a, a + W - 1)
  out[i + 1] = try(start_entry, KEYS[1 + 2 * i], KEYS[2 + 2 * i], msgid, tonumber(entryAttempt), reclaimed, worker, now, nowtxt)
end
return out
`))

// completeBatchScript records the outcomes of a batch of executions, in order,
// each exactly as if completed alone, in the seed's write order: task hash,
// event, result (or schedule / dead-letter entry), idempotency record (SET XX,
// see idem_update), then XACK+XDEL of the entry (of all the batch's entries at
// the end, one XACK and one XDEL per stream). The config is read once per
// batch. A succeeded task's payload is dropped (it never runs again); a failed
// or dead-lettered one keeps it, for a requeue or a retry.
//
// Fencing: an item counts only when the task is Running the very execution it
// names: the same entry, worker and attempt (start_entry moves worker and
// attempt when a reclaimed copy starts elsewhere). Any other completion is
// stale and changes nothing; its entry is acknowledged only when it is no
// longer the task's current one or the task has moved on, never while
// another execution of it runs.
//
// KEYS[1]        -> dtq:{<ns>/<q>}:config
// KEYS[2]        -> dtq:{<ns>/<q>}:schedule
// per item i (from 0):
// KEYS[3+2i]     -> dtq:{<ns>/<q>}:task:<id>
// KEYS[4+2i]     -> dtq:{<ns>/<q>}:stream:p<band> (the entry's)
//
// A flow-controlled task (fq) gives its concurrency slot back whatever the
// outcome (fc_release), and its execution time (now - started_at) is added to
// the counters flow_exec_ms and flow_exec_n.
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> now, Unix ms
// ARGV[3]        -> now, RFC 3339
// ARGV[4]        -> tasks the caller reads in the same round trip (CompleteNext): slots they take need no wake token
// per item i, ARGV[5+i]: the item packed (pack.go), completeItemFields fields:
// msgid          -> entry id
// worker         -> worker id
// runAttempt     -> the attempt the execution ran
// kind           -> "ok", "error" or "cancel"
// res            -> result JSON ("" none)
// errmsg         -> error message
// class          -> error class
// retryable      -> "1" or "0"
// jitter         -> retry jitter sample in [-1, 1]
//
// Returns one reply per item: the new state (a string; {state} when the same
// execution was recorded already: a retry); {"stale", state} for a
// stale completion (state "" when the task is gone); or {"err", message} for a
// Redis error in that item only.
var completeBatchScript = script(batchBody(completeItemArgs, `
local ITEM = "`+packFormat(completeItemFields)+`"
local now, nowtxt = ARGV[2], ARGV[3]
local cfg -- read on first use
-- Entries to acknowledge, by stream: one XACK and one XDEL per stream at the
-- end (the script is atomic, so nobody sees the difference; XDEL of a
-- stream's first entry rescans for the new first ID once per call, not once
-- per entry).
local acks, streams = {}, {}
local function ack(stream, msgid)
  local ids = acks[stream]
  if not ids then
    ids = {}
    acks[stream] = ids
    streams[#streams + 1] = stream
  end
  ids[#ids + 1] = msgid
end
local released, exec_ms = {}, 0 -- flow-controlled tasks whose slots this call gives back, their execution times
local function complete(tk, stream, a)
  local item = unpack(ARGV, a, a + W - 1)
  local _, msgid, worker, runAttempt, kind, res, errmsg, class, retryable, jitter = struct.unpack(ITEM, item)
  local h = redis.call("HMGET", tk, "state", "attempt", "max_attempts", "msg", "ikey", "worker_id", "fq", "started_at")
  local id, state, attempt, maxAttempts = task_id(tk), h[1], tonumber(h[2]), tonumber(h[3])
  if state ~= "Running" or h[4] ~= msgid or h[6] ~= worker or h[2] ~= runAttempt then
    if h[4] ~= msgid or (state ~= "Running" and state ~= "Queued") then ack(stream, msgid) end
    -- This very execution, already recorded: a client retry whose first reply
    -- was lost gets the same answer.
    if h[4] == msgid and h[6] == worker and h[2] == runAttempt then return {state} end
    return {"stale", state or ""}
  end
  if not cfg then
    cfg = redis.call("HMGET", KEYS[1], "task_ttl_ms", "result_ttl_ms", "result_max", "retry_base_ms", "retry_max_ms", "retry_jitter", "idem_ttl_ms", "flow")
    TASK_TTL, IDEM_TTL = cfg[1], cfg[7] -- for finish, exhaust and idem_update
    FLOW_CFG = flow_parse(cfg[8]) -- for fc_flush
  end
  if h[7] == "1" then
    -- A flow-controlled task leaves Running: its slot goes back, and its
    -- execution time feeds the autoscaler's mean (FlowMetrics.MeanExec).
    released[#released + 1] = task_id(tk)
    exec_ms = exec_ms + math.max(0, tonumber(now) - (tonumber(h[8]) or tonumber(now)))
  end
  if kind == "ok" then
    state = "Succeeded"
    local max = tonumber(cfg[3])
    if #res > max then
      res = cjson.encode(string.sub(res, 1, max))
      redis.call("HSET", tk, "state", state, "finished_at", now, "payload", "", "result_truncated", 1)
    else
      redis.call("HSET", tk, "state", state, "finished_at", now, "payload", "")
    end
    redis.call("PEXPIRE", tk, cfg[1])
    batch_event("TaskSucceeded", id, h[2], now)
    count("finished:Succeeded")
    -- No result (the handler returned none): nothing to store.
    if res ~= "" then redis.call("SET", k_result(id), res, "PX", cfg[2]) end
    idem_update(h[5], id, "completed", nowtxt)
  elseif kind == "cancel" then
    state = "Cancelled"
    finish(id, state, "TaskCancelled", attempt, h[5], now, nowtxt)
  elseif retryable == "1" and attempt < maxAttempts then
    state = "Retrying"
    local delay = math.min(tonumber(cfg[5]), tonumber(cfg[4]) * 2 ^ (attempt - 1))
    delay = math.max(0, math.floor(delay * (1 + tonumber(cfg[6]) * tonumber(jitter))))
    local due = int(tonumber(now) + delay)
    redis.call("HSET", tk, "state", state, "finished_at", now, "available_at", due,
      "last_error", errmsg, "error_class", class)
    event("TaskRetryScheduled", id, attempt, now)
    redis.call("ZADD", KEYS[2], due, id)
    count("retries")
  else
    state = exhaust(id, attempt, h[5], errmsg, class, now, nowtxt)
  end
  ack(stream, msgid)
  return state -- a string, not {state}: itemReply reads both, a table costs Redis seven lookups more
end

FLOW_READS = tonumber(ARGV[4])
local out = {}
for i = 0, math.floor((#KEYS - 2) / 2) - 1 do
  out[i + 1] = try(complete, KEYS[3 + 2 * i], KEYS[4 + 2 * i], 5 + W * i)
end
for _, stream in ipairs(streams) do
  redis.call("XACK", stream, GROUP, unpack(acks[stream]))
  redis.call("XDEL", stream, unpack(acks[stream]))
end
if #released > 0 then
  count("flow_exec_ms", exec_ms)
  count("flow_exec_n", #released)
  fc().release(released)
end
return out
`))

// touchScript resets the idle time of in-flight entries (XCLAIM JUSTID, idle
// 0) so a live worker's long tasks are not reclaimed, fenced like
// completeBatchScript: an entry is touched only while its task is Running the
// very execution the item names (entry, worker, attempt) and the entry is
// pending for this consumer. An entry another worker has reclaimed is left to
// its new owner: never claimed back.
//
// per item i (from 0):
// KEYS[1+2i]     -> dtq:{<ns>/<q>}:task:<id>
// KEYS[2+2i]     -> dtq:{<ns>/<q>}:stream:p<band> (the entry's)
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> consumer
// per item i, touchItemArgs from ARGV[3+W*i], unpacked as:
// msgid          -> entry id
// worker         -> worker id
// attempt        -> the attempt the execution runs
//
// Returns the positions (from 1) of the items that are no longer their
// execution's: their handlers should stop.
var touchScript = script(batchBody(touchItemArgs, `
local consumer = ARGV[2]
local lost = {}
for i = 0, math.floor(#KEYS / 2) - 1 do
  local stream, a = KEYS[2 + 2 * i], 3 + W * i
  local msgid, worker, attempt = unpack(ARGV, a, a + W - 1)
  local h = redis.call("HMGET", KEYS[1 + 2 * i], "state", "msg", "worker_id", "attempt")
  if h[1] == "Running" and h[2] == msgid and h[3] == worker and h[4] == attempt and
    #redis.call("XPENDING", stream, GROUP, msgid, msgid, 1, consumer) == 1 then
    redis.call("XCLAIM", stream, GROUP, consumer, 0, msgid, "JUSTID")
  else
    lost[#lost + 1] = i + 1
  end
end
return lost
`))

// releaseScript hands a running execution's task back to its queue at once
// (a draining worker's tasks): the entry is acknowledged and deleted and a new
// one added at the end of the task's band, so any worker reads it now instead
// of reclaiming it after the visibility timeout. It is fenced like
// touchScript: only while the task is Running the very execution named
// (entry, worker, attempt) and the entry is pending for this consumer, so a
// worker that lost its lease cannot take a task back from its new owner.
//
// On a flow-controlled queue the task goes back to the end of its key's
// list (fc_route) and its slot is given back.
//
// An execution whose handler never began (ran "0") costs no attempt: the
// task is Queued again with the same attempt. One that began (ran "1", a
// handler interrupted mid-run) counts as a crash redelivery does: attempt+1,
// and past max_attempts the task is exhausted (dead-lettered, class
// WorkerLost). A task whose cancel was requested ends Cancelled instead.
//
// KEYS[1]        -> dtq:{<ns>/<q>}:task:<id>
// KEYS[2]        -> dtq:{<ns>/<q>}:stream:p<band> (the entry's)
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> consumer
// ARGV[3]        -> entry id
// ARGV[4]        -> worker id
// ARGV[5]        -> the attempt the execution runs
// ARGV[6]        -> ran: "1" the handler began, "0" it never did
// ARGV[7]        -> now, Unix ms
// ARGV[8]        -> now, RFC 3339
//
// Returns {state}: Queued, Cancelled, DeadLettered or Failed; or {"stale",
// state} when the execution is no longer the task's (state "" when the task
// is gone): nothing changed.
var releaseScript = script(`
local tk, stream = KEYS[1], KEYS[2]
local consumer, msgid, worker, runAttempt, ran, now, nowtxt = unpack(ARGV, 2, 8)
local h = redis.call("HMGET", tk, "state", "attempt", "max_attempts", "msg", "ikey", "worker_id", "cancel_requested", "fq", "prio", "fk")
if h[1] ~= "Running" or h[4] ~= msgid or h[6] ~= worker or h[2] ~= runAttempt or
  #redis.call("XPENDING", stream, GROUP, msgid, msgid, 1, consumer) ~= 1 then
  return {"stale", h[1] or ""}
end
local id, attempt = task_id(tk), tonumber(h[2])
redis.call("XACK", stream, GROUP, msgid)
redis.call("XDEL", stream, msgid)
if h[8] == "1" then fc().release({id}) end
if h[7] == "1" then
  finish(id, "Cancelled", "TaskCancelled", attempt, h[5], now, nowtxt)
  return {"Cancelled"}
end
if ran == "1" then
  attempt = attempt + 1
  if attempt > tonumber(h[3]) then
    return {exhaust(id, attempt - 1, h[5], "worker lost the task on every attempt (interrupted by a drain, a crash or the visibility timeout)", "WorkerLost", now, nowtxt)}
  end
end
fc_route(tk, id, h[9], h[10] or "", attempt, now, {"state", "Queued", "attempt", attempt, "available_at", now})
event("TaskReleased", id, attempt, now)
return {"Queued"}
`)

// progressScript records a running execution's progress: the task hash's
// progress and progress_at fields and a TaskProgress event carrying it. It is
// fenced like completeBatchScript: only while the task is Running the very
// execution named (entry, worker, attempt).
//
// KEYS[1]        -> dtq:{<ns>/<q>}:task:<id>
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> entry id
// ARGV[3]        -> worker id
// ARGV[4]        -> the attempt the execution runs
// ARGV[5]        -> progress, compact JSON (at most MaxProgressBytes)
// ARGV[6]        -> now, Unix ms
//
// Returns {"ok"} or {"stale", state} (state "" when the task is gone):
// nothing written. Sent twice, it writes nothing the second time (the same
// progress at the same now).
var progressScript = script(`
local tk = KEYS[1]
local msgid, worker, runAttempt, progress, now = unpack(ARGV, 2, 6)
local h = redis.call("HMGET", tk, "state", "msg", "worker_id", "attempt", "progress", "progress_at")
if h[1] ~= "Running" or h[2] ~= msgid or h[3] ~= worker or h[4] ~= runAttempt then
  return {"stale", h[1] or ""}
end
if h[5] == progress and h[6] == now then return {"ok"} end -- this call sent twice
redis.call("HSET", tk, "progress", progress, "progress_at", now)
redis.call("XADD", K_EVENTS, "MAXLEN", "~", "` + eventsMaxLenText + `", "*",
  "type", "TaskProgress", "task", task_id(tk), "attempt", runAttempt, "at", now, "progress", progress)
return {"ok"}
`)

// promoteScript moves up to ARGV[4] due schedule members to their streams
// (on a flow-controlled queue, to their key lists: fc_route):
// Pending keeps its attempt, Retrying gets attempt+1, an expired one (Retrying
// included) ends Expired, a cancel-requested one Cancelled; members whose task
// is missing or in any other state are dropped.
//
// KEYS[1]        -> dtq:{<ns>/<q>}:schedule
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> now, Unix ms
// ARGV[3]        -> now, RFC 3339
// ARGV[4]        -> limit
//
// Returns {moved, score of the next member or ""}.
var promoteScript = script(`
local now = ARGV[2]
local ids = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now, "LIMIT", 0, tonumber(ARGV[4]))
local moved = 0
for _, id in ipairs(ids) do
  redis.call("ZREM", KEYS[1], id)
  local tk = k_task(id)
  local h = redis.call("HMGET", tk, "state", "attempt", "prio", "expires_at", "cancel_requested", "ikey", "fk")
  local state, attempt = h[1], tonumber(h[2])
  if state == "Pending" or state == "Retrying" then
    local expires = tonumber(h[4]) or 0
    if h[5] == "1" then
      finish(id, "Cancelled", "TaskCancelled", attempt, h[6], now, ARGV[3])
    elseif expires > 0 and tonumber(now) >= expires then
      finish(id, "Expired", "TaskExpired", attempt, h[6], now, ARGV[3])
    else
      local ev = "TaskQueued"
      if state == "Retrying" then attempt, ev = attempt + 1, "TaskRetried" end
      fc_route(tk, id, h[3], h[7] or "", attempt, now, {"state", "Queued", "attempt", attempt, "available_at", now})
      event(ev, id, attempt, now)
      moved = moved + 1
    end
  end
end
local nxt = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
return {moved, nxt[2] or ""}
`)

// cancelScript cancels a task: Pending, Queued and Retrying end Cancelled at
// once (schedule member or stream entry removed, record failed); Running gets
// cancel_requested and a TaskCancelRequested event.
//
// KEYS[1]        -> dtq:{<ns>/<q>}:task:<id>
// KEYS[2]        -> dtq:{<ns>/<q>}:schedule
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> task id
// ARGV[3]        -> now, Unix ms
// ARGV[4]        -> now, RFC 3339
//
// Returns {"notfound"}, {"terminal", state} or {state after the call}. Sent
// twice, it writes nothing the second time and answers as the first send
// did (a task it cancelled has finished_at now).
var cancelScript = script(`
local tk, id, now = KEYS[1], ARGV[2], ARGV[3]
local h = redis.call("HMGET", tk, "state", "attempt", "prio", "msg", "ikey", "cancel_requested", "finished_at", "fq", "fk")
local state = h[1]
if not state then return {"notfound"} end
if state == "Cancelled" and h[7] == now then return {"Cancelled"} end -- this call sent twice
if TERMINAL[state] then return {"terminal", state} end
if state == "Running" then
  if h[6] == "1" then return {"Running"} end -- requested already: no second event
  redis.call("HSET", tk, "cancel_requested", 1)
  event("TaskCancelRequested", id, h[2], now)
  return {"Running"}
end
if state == "Queued" and h[4] and h[4] ~= "" then
  redis.call("XDEL", k_stream(h[3]), h[4])
elseif state == "Queued" and h[8] == "1" then
  fc().unlist(h[3], h[9] or "", id) -- in its key list (flow control)
else
  redis.call("ZREM", KEYS[2], id)
end
finish(id, "Cancelled", "TaskCancelled", h[2], h[5], now, ARGV[4])
return {"Cancelled"}
`)

// requeueScript runs a finished task again with attempt 1: a dead-letter
// requeue (DeadLettered only) or a retry (Failed too). It removes the
// dead-letter entry, adds the run's attempts to previous_attempts, and resets
// the idempotency record to processing, without expiry until the task ends
// again (unless the key now belongs to another task). A retry stores its
// token in the task hash, and a second retry with the same token changes
// nothing and answers "ok", so a caller that lost the reply (or crashed
// before recording it) retries once.
//
// KEYS[1]        -> dtq:{<ns>/<q>}:task:<id>
// KEYS[2]        -> dtq:{<ns>/<q>}:dead-letter
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> task id
// ARGV[3]        -> now, Unix ms
// ARGV[4]        -> now, RFC 3339
// ARGV[5]        -> retry token ("": a dead-letter requeue)
//
// Returns {"notfound"}, {"conflict", state} or {"ok", HGETALL task}.
var requeueScript = script(`
local tk, id, now, token = KEYS[1], ARGV[2], ARGV[3], ARGV[5]
local h = redis.call("HMGET", tk, "state", "attempt", "prio", "dlq", "ikey", "previous_attempts", "retry_token", "fk")
if not h[1] then return {"notfound"} end
if token ~= "" and h[7] == token then return {"ok", redis.call("HGETALL", tk)} end
if h[1] ~= "DeadLettered" and not (token ~= "" and h[1] == "Failed") then return {"conflict", h[1]} end
if h[4] then redis.call("XDEL", KEYS[2], h[4]) end
redis.call("HDEL", tk, "dlq", "discarded", "cancel_requested", "started_at", "finished_at", "worker_id")
fc_route(tk, id, h[3], h[8] or "", 1, now, {"state", "Queued", "attempt", 1, "previous_attempts", int((tonumber(h[6]) or 0) + tonumber(h[2])),
  "available_at", now})
if token ~= "" then redis.call("HSET", tk, "retry_token", token) end
redis.call("PERSIST", tk) -- retention counts from the end again
if h[5] and h[5] ~= "" then
  local rk = k_idem(h[5])
  local cur = redis.call("GET", rk)
  local ok, rec = pcall(cjson.decode, cur or "")
  if not cur or (ok and rec.task_id == id) then
    redis.call("SET", rk, record(id, "processing", ARGV[4]))
  end
end
event("TaskRetried", id, 1, now)
return {"ok", redis.call("HGETALL", tk)}
`)

// discardScript removes a task's dead-letter entry; the task stays DeadLettered
// and is marked discarded.
//
// KEYS[1]        -> dtq:{<ns>/<q>}:task:<id>
// KEYS[2]        -> dtq:{<ns>/<q>}:dead-letter
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
//
// Returns "ok", "notfound" (task) or "noentry" (no dead-letter entry).
var discardScript = script(`
local h = redis.call("HMGET", KEYS[1], "state", "dlq")
if not h[1] then return "notfound" end
if not h[2] or redis.call("XDEL", KEYS[2], h[2]) == 0 then return "noentry" end
redis.call("HDEL", KEYS[1], "dlq")
redis.call("HSET", KEYS[1], "discarded", 1)
return "ok"
`)

// purgeScript empties the dead-letter stream exactly (XTRIM MAXLEN 0 without
// "~", original defect 9).
//
// KEYS[1]        -> dtq:{<ns>/<q>}:dead-letter
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
//
// Returns the number of entries removed.
var purgeScript = script(`
local n = redis.call("XLEN", KEYS[1])
redis.call("XTRIM", KEYS[1], "MAXLEN", 0)
return n
`)

// pauseScript sets or clears the paused flag and appends the queue event.
//
// KEYS[1]        -> dtq:{<ns>/<q>}:paused
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> "1" pause, "0" resume
// ARGV[3]        -> now, Unix ms
//
// Returns 1 when the flag changed, else 0.
var pauseScript = script(`
local changed
if ARGV[2] == "1" then
  changed = redis.call("SET", KEYS[1], "1", "NX") and 1 or 0
  if changed == 1 then event("QueuePaused", "", 0, ARGV[3]) end
else
  changed = redis.call("DEL", KEYS[1])
  if changed == 1 then event("QueueResumed", "", 0, ARGV[3]) end
end
return changed
`)

// removeConsumerScript deletes a consumer from every band's group, but only
// when it has no pending entries in any of them (DELCONSUMER would drop them).
//
// KEYS[1..10]    -> dtq:{<ns>/<q>}:stream:p0 .. dtq:{<ns>/<q>}:stream:p9
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> consumer
//
// Returns 1 when removed, 0 when the consumer has pending entries.
var removeConsumerScript = script(`
for i = 1, 10 do
  if #redis.call("XPENDING", KEYS[i], GROUP, "-", "+", 1, ARGV[2]) > 0 then return 0 end
end
for i = 1, 10 do redis.call("XGROUP", "DELCONSUMER", KEYS[i], GROUP, ARGV[2]) end
return 1
`)

// queueMetricsScript reads a queue's backlog and counters (read only). Per
// band, the entries not yet delivered are those after the group's
// last-delivered-id: their count is XLEN minus the group's pending entries
// (acknowledged entries are deleted), and the first of them is the oldest.
//
// KEYS[1..10]    -> dtq:{<ns>/<q>}:stream:p0 .. dtq:{<ns>/<q>}:stream:p9
// KEYS[11]       -> dtq:{<ns>/<q>}:schedule
// KEYS[12]       -> dtq:{<ns>/<q>}:dead-letter
// KEYS[13]       -> dtq:{<ns>/<q>}:paused
// KEYS[14]       -> dtq:{<ns>/<q>}:stats
// KEYS[15]       -> dtq:{<ns>/<q>}:flow
//
// No ARGV (so no luaLib, which reads the prefix from ARGV[1]).
//
// Returns {{XLEN, pending, ID of the oldest undelivered entry or ""} per band,
// ZCARD schedule, XLEN dead-letter, paused (1 or 0), HGETALL stats, flow
// control (1: the queue has some, flowMetricsScript reads it; else 0)}.
var queueMetricsScript = redis.NewScript(`
local bands = {}
for i = 1, 10 do
  local len, pending, oldest = redis.call("XLEN", KEYS[i]), 0, ""
  if len > 0 then
    local last = "0-0"
    for _, g in ipairs(redis.call("XINFO", "GROUPS", KEYS[i])) do
      local f = {}
      for j = 1, #g, 2 do f[g[j]] = g[j + 1] end
      if f.name == "` + group + `" then pending, last = f.pending, f["last-delivered-id"] end
    end
    local r = redis.call("XRANGE", KEYS[i], "(" .. last, "+", "COUNT", 1)
    if r[1] then oldest = r[1][1] end
  end
  bands[i] = {len, pending, oldest}
end
local st = redis.call("MGET", KEYS[13], KEYS[15])
return {bands, redis.call("ZCARD", KEYS[11]), redis.call("XLEN", KEYS[12]), st[1] and 1 or 0,
  redis.call("HGETALL", KEYS[14]), st[2] and 1 or 0}
`)

// purgeQueueScript cancels, as cancelScript does (Cancelled, TaskCancelled
// event, record failed), up to ARGV[4] waiting tasks: the stream entries the
// workers' group has not delivered yet (after its last-delivered-id), p9
// first, whatever their task (an entry of a task in another state is stale
// and goes too), then the flow control key lists' tasks (band 9 first: the
// keys of each band's ready set and the parked keys that left it), then
// schedule members (delayed and retrying tasks). Entries already delivered
// are running tasks, left alone.
//
// KEYS[1..10]    -> dtq:{<ns>/<q>}:stream:p0 .. dtq:{<ns>/<q>}:stream:p9
// KEYS[11]       -> dtq:{<ns>/<q>}:schedule
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> now, Unix ms
// ARGV[3]        -> now, RFC 3339
// ARGV[4]        -> limit
//
// Returns {cancelled, more}: more is 1 when the limit was reached (call again).
// It defines flow control's library (flowScript) for the key lists' keys: a
// purge is rare, so the hot scripts need not carry them.
var purgeQueueScript = flowScript(`
local now, nowtxt, left = ARGV[2], ARGV[3], tonumber(ARGV[4])
local cancelled = 0
local function cancel(id, states)
  local h = redis.call("HMGET", k_task(id), "state", "attempt", "ikey")
  if h[1] and states[h[1]] then
    finish(id, "Cancelled", "TaskCancelled", h[2], h[3], now, nowtxt)
    cancelled = cancelled + 1
  end
end
for band = 10, 1, -1 do
  if left <= 0 then break end
  local stream = KEYS[band]
  if redis.call("EXISTS", stream) == 1 then
    local delivered = "0-0"
    for _, g in ipairs(redis.call("XINFO", "GROUPS", stream)) do
      local f = {}
      for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
      if f.name == GROUP then delivered = f["last-delivered-id"] end
    end
    for _, e in ipairs(redis.call("XRANGE", stream, "(" .. delivered, "+", "COUNT", left)) do
      local f = e[2]
      for i = 1, #f, 2 do
        if f[i] == "t" then cancel(f[i + 1], {Queued = true}) end
      end
      redis.call("XDEL", stream, e[1])
      left = left - 1
    end
  end
end
-- Flow control's key lists (a queue that has any), band 9 first.
if left > 0 and (tonumber(redis.call("HGET", K_FS, "n")) or 0) > 0 then
  local park = redis.call("HGETALL", K_FPARK)
  for band = 9, 0, -1 do
    if left <= 0 then break end
    local keys = redis.call("ZRANGE", k_fready(band), 0, -1)
    for i = 1, #park, 2 do
      if string.find(park[i + 1], tostring(band), 2, true) then keys[#keys + 1] = park[i] end
    end
    for _, key in ipairs(keys) do
      if left <= 0 then break end
      local ids = redis.call("LRANGE", k_flist(band, key), 0, left - 1)
      for _, id in ipairs(ids) do cancel(id, {Queued = true}) end
      if #ids > 0 then
        redis.call("LTRIM", k_flist(band, key), #ids, -1)
        FQ_ADDED, left = FQ_ADDED - #ids, left - #ids
      end
    end
  end
end
if left > 0 then
  for _, id in ipairs(redis.call("ZRANGE", KEYS[11], 0, left - 1)) do
    cancel(id, {Pending = true, Retrying = true})
    redis.call("ZREM", KEYS[11], id)
    left = left - 1
  end
end
return {cancelled, left <= 0 and 1 or 0}
`)
