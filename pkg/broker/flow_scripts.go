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

import "strconv"

// Flow control's Lua (docs/flow-control.md has the layout and the
// algorithm in prose). A flow-controlled queue keeps its queued tasks in one
// list per (band, key), fc:q:<band>:<key>, instead of the band streams; the
// keys with work in a band are in its ready set fc:r:<band>, scored by their
// start tag (Weighted: start-time fair queueing) or their head task's time
// (FIFO). The claim (fc_claim, in readStartScript) admits from the ready sets
// under the limits and adds each admitted task to its band stream and the
// worker's pending list in the same call, so leases, heartbeats, reclaim and
// completion work on the streams exactly as without flow control. A held
// concurrency slot is a field of fc:held (task ID -> key), taken when the
// attempt starts and given back (fc_release) on every way out of Running.
//
// Times of the rate limits are microseconds of the Redis server's clock
// (TIME), one clock for every worker, unless a test passes its own (see
// Broker.rateClock). Numbers go to Redis through fnum: Lua's own
// conversion keeps 14 digits, too few for microseconds since 1970.

// luaFlowState is what every script shares with flow control's library: the
// state a script's body sets or reads (the rate clock, the limits, the reads
// of the call, the change to the key lists), the limits' parser, fc_route,
// and fc, which builds the library (fc_build: luaFlowLazy, or
// luaFlowEnqueueLazy in submitBatchScript) on first use. A script call on a
// queue without flow control never builds it: the library's closures cost
// about as much Redis CPU as a small script (BenchmarkScriptCost).
const luaFlowState = `
-- FLOW_CLOCK is the rate clock a test passes ("" or nil: Redis TIME); a
-- script that admits or charges sets it from its ARGV. FLOW_READS is how
-- many tasks the caller reads in the same round trip (CompleteNext): freed
-- slots they take need no wake token. FQ_ADDED is the change this call made
-- to the number of tasks in key lists (fc:s n).
local FLOW_CLOCK, FLOW_READS, FQ_ADDED = nil, 0, 0

-- int is an integer as Redis text ("%d": no exponent, no ".0").
local function int(x) return string.format("%d", x) end

-- flow_parse reads a queue's limits as EnsureQueue wrote them (flowText in
-- flow.go): "1 rate_limit rate_period_us rate_burst max_concurrency
-- key_concurrency key_rate_limit key_rate_period_us key_rate_burst
-- W|F overrides(0|1|2: none, some, some with a rate) digest", 0 for a limit
-- that is not set; krated says whether any key may have a rate; "off" while a
-- queue whose flow control was removed still serves its key lists (no
-- limits). nil for "" or nil: no flow control.
local function flow_parse(s)
  if not s or s == "" then return nil end
  local F = {rl = 0, rp = 1, rb = 1, maxc = 0, kc = 0, krl = 0, krp = 1, krb = 1, fifo = false, ov = false, off = s == "off"}
  if F.off then return F end
  local f = {}
  for w in string.gmatch(s, "%S+") do f[#f + 1] = w end
  F.rl, F.rp, F.rb, F.maxc = tonumber(f[2]), tonumber(f[3]), tonumber(f[4]), tonumber(f[5])
  F.kc, F.krl, F.krp, F.krb = tonumber(f[6]), tonumber(f[7]), tonumber(f[8]), tonumber(f[9])
  F.fifo, F.ov = f[10] == "F", f[11] ~= "0"
  F.krated = F.krl > 0 or f[11] == "2"
  return F
end

-- FLOW_CFG is the queue's limits (flow_parse) once read; false until then.
local FLOW_CFG = false
local function flow_cfg()
  if FLOW_CFG == false then FLOW_CFG = flow_parse(redis.call("HGET", K_CONFIG, "flow")) end
  return FLOW_CFG
end


-- FCL is flow control's library once fc built it (a table of its
-- functions), nil before.
local FCL, fc_build
-- The engine's helpers flow control's library uses (luaEngine assigns them).
local try, finish, read_task, start_entry, start_reply
local function fc()
  if not FCL then FCL = fc_build() end
  return FCL
end

-- fc_route queues task id (hash tk, band b, flow key key) again, runnable
-- since at, after it left Running or the schedule: in its key list while the
-- queue has flow control, else in its band stream as without it. fields are
-- written to the task hash with its new msg ("" in a list). Returns the
-- entry ID ("" in a list).
local function fc_route(tk, id, b, key, attempt, at, fields)
  local F = flow_cfg()
  local msg = ""
  if F and not F.off then
    fc().enqueue(F, b, key, id, at)
    fields[#fields + 1] = "fq"
    fields[#fields + 1] = "1"
  else
    msg = redis.call("XADD", k_stream(b), "*", "t", id, "a", attempt)
  end
  fields[#fields + 1] = "msg"
  fields[#fields + 1] = msg
  redis.call("HSET", tk, unpack(fields))
  return msg
end
`

// luaFlowEnqueue is the part of flow control that submitting needs:
// fc_enqueue, which adds a task to its key's list and the key to its band's
// ready set. It is the start of flow control's library (luaFlowLazy) and,
// alone, submitBatchScript's (luaFlowEnqueueLazy).
const luaFlowEnqueue = `
local function fnum(x) return string.format("%.17g", x) end

-- WAKE is the wake tokens this call owes (FQ_ADDED, in luaFlowState, the
-- change it made to the tasks in key lists); fc_flush writes both once.
local WAKE = 0

-- VT holds each band's virtual time (fc:s v<band>) as read or moved by this
-- call; VT_SET the bands the claim moved.
local VT, VT_SET = {}, {}
local function vtime(b)
  local v = VT[b]
  if not v then
    v = tonumber(redis.call("HGET", K_FS, "v" .. b)) or 0
    VT[b] = v
  end
  return v
end

-- parked returns key's parking record (fc:park: "c" its concurrency cap or
-- "r" its rate, then the digits of the bands it left), false when none.
local PARK = {}
local function parked(key)
  local p = PARK[key]
  if p == nil then
    p = redis.call("HGET", K_FPARK, key) or false
    PARK[key] = p
  end
  return p
end

-- park_band adds band b to a parked key's bands.
local function park_band(key, p, b)
  if string.find(p, tostring(b), 2, true) then return end
  p = p .. b
  redis.call("HSET", K_FPARK, key, p)
  PARK[key] = p
end

-- head_time is when the first task of key's list in band b became runnable
-- (FIFO fairness orders keys by it); nil when the list is empty.
local function head_time(b, key)
  local id = redis.call("LINDEX", k_flist(b, key), 0)
  if not id then return nil end
  local h = redis.call("HMGET", k_task(id), "available_at", "created_at")
  return tonumber(h[1] or h[2]) or 0
end

-- fc_ready adds key to band b's ready set unless it is there: Weighted at
-- the later of its finish tag (kept in fc:f:<band> while it was out) and the
-- band's virtual time, so a key cannot gain by leaving and coming back; FIFO
-- at its head task's time (head when the caller knows it). True when it was
-- added.
local function fc_ready(F, b, key, head)
  local score
  if F.fifo then
    score = head or head_time(b, key)
    if not score then return false end
  else
    score = math.max(tonumber(redis.call("ZSCORE", k_ffin(b), key)) or 0, vtime(b))
  end
  return redis.call("ZADD", k_fready(b), "NX", fnum(score), key) == 1
end

-- NEWLY holds, per band, the keys whose lists this call made non-empty,
-- with their first task's time: fc_flush_ready makes them ready.
local NEWLY, NEWLY_F = {}, nil

-- fc_enqueue appends task id, runnable since at (Unix ms), to key's list in
-- band b. A list that was empty makes the key ready in b (or, while the key
-- is parked, adds b to the bands it returns to): fc_flush_ready does it for
-- all such keys of a call at once.
local function fc_enqueue(F, b, key, id, at)
  FQ_ADDED = FQ_ADDED + 1
  if redis.call("RPUSH", k_flist(b, key), id) > 1 then return end
  NEWLY_F = F
  b = tonumber(b)
  NEWLY[b] = NEWLY[b] or {keys = {}, at = {}}
  local n = NEWLY[b]
  n.keys[#n.keys + 1] = key
  n.at[#n.keys] = tonumber(at) or 0
end

-- fc_flush_ready makes the keys fc_enqueue saw become non-empty ready, per
-- band in one ZADD NX (a parked key instead gets the band added to the ones
-- it returns to), scored as fc_ready does; a key that became ready is owed
-- one wake token: a waiting worker may now admit it.
local function fc_flush_ready()
  local F = NEWLY_F
  if not F then return end
  for b, n in pairs(NEWLY) do
    local want = {}
    for _, key in ipairs(n.keys) do if PARK[key] == nil then want[#want + 1] = key end end
    if #want > 0 then
      local p = redis.call("HMGET", K_FPARK, unpack(want))
      for i, key in ipairs(want) do PARK[key] = p[i] or false end
    end
    local fin = (not F.fifo) and redis.call("ZMSCORE", k_ffin(b), unpack(n.keys))
    local z = {}
    for i, key in ipairs(n.keys) do
      if PARK[key] then
        park_band(key, PARK[key], b)
      else
        local score = F.fifo and n.at[i] or math.max(tonumber(fin[i]) or 0, vtime(b))
        z[#z + 1] = fnum(score)
        z[#z + 1] = key
      end
    end
    if #z > 0 and redis.call("ZADD", k_fready(b), "NX", unpack(z)) > 0 then WAKE = 1 end
  end
  NEWLY, NEWLY_F = {}, nil
end

-- fc_wake adds n wake tokens (at most 8: a worker that wakes and still
-- sees work wakes the next one) to the wake stream, which keeps the newest
-- 64; each wakes one waiting worker (waitWake in flow.go).
local function fc_wake(n)
  for _ = 1, math.min(n, 8) do
    pcall(redis.call, "XADD", K_FWAKE, "NOMKSTREAM", "MAXLEN", 64, "*", "w", 1)
  end
end

-- fc_flush_enqueue writes what fc_enqueue left: the keys made ready, the
-- list count, the wake.
local function fc_flush_enqueue()
  fc_flush_ready()
  if FQ_ADDED ~= 0 then redis.call("HINCRBY", K_FS, "n", FQ_ADDED) end
  if WAKE > 0 then fc_wake(WAKE) end
  FQ_ADDED, WAKE = 0, 0
end
`

// luaFlow is the rest of flow control's library but the claim.
const luaFlow = `
-- FNOW is the rate clock's now (FLOW_CLOCK, or Redis TIME), read once per
-- call.
local FNOW = nil
local function flow_now()
  if not FNOW then
    if FLOW_CLOCK and FLOW_CLOCK ~= "" then
      FNOW = tonumber(FLOW_CLOCK)
    else
      local t = redis.call("TIME")
      FNOW = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
  end
  return FNOW
end

-- cached reads a hash's field per key once per call: get(key) reads one
-- (HGET), prefetch(keys) those not read yet in one HMGET, set(key, v) changes
-- one, and flush() writes the changes in one HSET (and one HDEL for the
-- values drop says to delete). The claim and the releases of a call work on
-- the counts and arrival times this way: one read and one write per call,
-- not per task.
local CACHES = {}
local function cached(hash, parse, drop, format)
  local c = {v = {}, dirty = {}}
  function c.get(key)
    local v = c.v[key]
    if v == nil then
      v = parse(redis.call("HGET", hash, key))
      c.v[key] = v
    end
    return v
  end
  function c.prefetch(keys)
    local want = {}
    for _, k in ipairs(keys) do if c.v[k] == nil then want[#want + 1] = k end end
    if #want == 0 then return end
    local r = redis.call("HMGET", hash, unpack(want))
    for i, k in ipairs(want) do c.v[k] = parse(r[i]) end
  end
  function c.set(key, v)
    c.v[key] = v
    c.dirty[key] = true
  end
  function c.flush()
    local set, del = {}, {}
    for k in pairs(c.dirty) do
      if drop(c.v[k]) then del[#del + 1] = k else set[#set + 1] = k; set[#set + 1] = format(c.v[k]) end
    end
    if #set > 0 then redis.call("HSET", hash, unpack(set)) end
    if #del > 0 then redis.call("HDEL", hash, unpack(del)) end
    c.dirty = {}
  end
  CACHES[#CACHES + 1] = c
  return c
end
local function num0(x) return tonumber(x) or 0 end
local function never() return false end
local function nonpositive(n) return n <= 0 end

-- HC is fc:hc (key -> slots held), KTAT fc:tat (key -> its rate's
-- theoretical arrival time), OV fc:o (key -> its override text).
local HC = cached(K_FHC, num0, nonpositive, int)
local KTAT = cached(K_FTAT, num0, never, fnum)
local OV = cached(K_FO, function(x) return x or false end, never, tostring)

-- key_limits returns key's weight and limits: the queue's per-key limits,
-- replaced field by field by the key's override (fc:o: "weight cap limit
-- period_us burst", 0 for a field it does not set).
-- The tables are read-only: every key without an override shares one.
local KEYLIM, KEYLIM_DEF = {}, nil
local function key_limits(F, key)
  local l = KEYLIM[key]
  if l then return l end
  KEYLIM_DEF = KEYLIM_DEF or {w = 1, cap = F.kc, rl = F.krl, rp = F.krp, rb = F.krb}
  l = KEYLIM_DEF
  local o, w, c, rl, rp, rb = F.ov and OV.get(key)
  if o then w, c, rl, rp, rb = string.match(o, "^(%d+) (%d+) (%d+) (%d+) (%d+)$") end
  if w then
    -- An override's table reads the fields it does not set from the default's.
    l = setmetatable({}, {__index = KEYLIM_DEF})
    if tonumber(w) > 0 then l.w = tonumber(w) end
    if tonumber(c) > 0 then l.cap = tonumber(c) end
    if tonumber(rl) > 0 then l.rl, l.rp, l.rb = tonumber(rl), tonumber(rp), tonumber(rb) end
  end
  KEYLIM[key] = l
  return l
end

-- gcra_room returns how many starts a rate of limit per period (us) with
-- burst admits at now, given its theoretical arrival time tat (GCRA: at most
-- burst + t*limit/period starts in any interval t), and when it admits none,
-- the time it admits the next.
local function gcra_room(tat, now, limit, period, burst)
  local t = period / limit
  local used, tau = math.max(tat, now) - now, (burst - 1) * t
  if used > tau + 1e-6 then return 0, math.max(tat, now) - tau end
  return math.floor((tau - used) / t + 1e-9) + 1, nil
end

-- gcra_take is the theoretical arrival time after k more starts.
local function gcra_take(tat, now, limit, period, k)
  return math.max(tat, now) + k * period / limit
end


-- fc_park records that key left band b's ready set for reason ("c" at its
-- cap: a freed slot brings it back; "r" over its rate: fc:timed brings it
-- back). The latest reason is kept: whichever brings the key back, the
-- claim checks it again and parks it again while a limit still holds.
local function fc_park(key, b, reason)
  local p = parked(key)
  local bands = p and string.sub(p, 2) or ""
  if not string.find(bands, tostring(b), 1, true) then bands = bands .. b end
  p = reason .. bands
  redis.call("HSET", K_FPARK, key, p)
  PARK[key] = p
end

-- fc_unpark returns a parked key to the ready sets of the bands it left;
-- true when it is ready in one of them.
local function fc_unpark(F, key)
  local p = parked(key)
  if not p then return false end
  redis.call("HDEL", K_FPARK, key)
  PARK[key] = false
  local any = false
  for b in string.gmatch(string.sub(p, 2), "%d") do
    if fc_ready(F, tonumber(b), key) then any = true end
  end
  return any
end

-- REL lists the keys whose slots this call gave back ({key, held now,
-- given back}); REL_N counts the slots. fc_flush acts on them.
local REL, REL_N = {}, 0

-- fc_release gives back the concurrency slots held by the task IDs ids:
-- each slot is a field of fc:held naming its key, so giving one back twice
-- changes nothing.
local FC_CHUNK = 4096
local function fc_release(ids)
  if #ids == 0 then return end
  local held, per, order = {}, {}, {}
  -- In chunks: unpack of more than about 8000 values fails (a repair by
  -- flowReconcileScript may give back any number of slots).
  for s = 1, #ids, FC_CHUNK do
    local keys = redis.call("HMGET", K_FHELD, unpack(ids, s, math.min(s + FC_CHUNK - 1, #ids)))
    for i, key in ipairs(keys) do
      if key then
        held[#held + 1] = ids[s + i - 1]
        if not per[key] then order[#order + 1] = key end
        per[key] = (per[key] or 0) + 1
      end
    end
  end
  if #held == 0 then return end
  for s = 1, #held, FC_CHUNK do
    redis.call("HDEL", K_FHELD, unpack(held, s, math.min(s + FC_CHUNK - 1, #held)))
  end
  HC.prefetch(order)
  for _, key in ipairs(order) do
    local n = math.max(HC.get(key) - per[key], 0)
    HC.set(key, n)
    REL[#REL + 1] = {key, n, per[key]}
  end
  REL_N = REL_N + #held
end

-- fc_after_release wakes waiting workers for the slots this call gave back:
-- a key parked at its cap that is now below it returns to its bands, and
-- each slot freed at a cap (the key's or the queue's maxConcurrency) is one
-- wake token, less the tasks the caller reads next.
local function fc_after_release()
  local F = flow_cfg()
  if not F then return end
  local tokens = 0
  if F.maxc > 0 then
    local h = redis.call("HLEN", K_FHELD)
    if h < F.maxc and h + REL_N >= F.maxc then tokens = math.min(REL_N, F.maxc - h) end
  end
  local freed = 0
  for _, r in ipairs(REL) do
    local key, n, c = r[1], r[2], r[3]
    local cap = key_limits(F, key).cap
    if cap > 0 and n < cap and n + c >= cap then
      local p = parked(key)
      if p and string.sub(p, 1, 1) == "c" and fc_unpark(F, key) then freed = freed + math.min(c, cap - n) end
    end
  end
  WAKE = WAKE + math.max(tokens, freed) - FLOW_READS
end

-- fc_charge counts a crash redelivery (a reclaimed attempt of a Running
-- task, which keeps its slot) against the queue's and the key's rate,
-- without refusing it: the task runs already.
local function fc_charge(key)
  local F = flow_cfg()
  if not F or F.off then return end
  local now = flow_now()
  if F.rl > 0 then
    local tat = tonumber(redis.call("HGET", K_FS, "tat")) or 0
    redis.call("HSET", K_FS, "tat", fnum(gcra_take(tat, now, F.rl, F.rp, 1)))
  end
  local l = key_limits(F, key)
  if l.rl > 0 then KTAT.set(key, gcra_take(KTAT.get(key), now, l.rl, l.rp, 1)) end
end

-- fc_unlist removes a queued task from its key list (a cancel); true when
-- it was there.
local function fc_unlist(b, key, id)
  if redis.call("LREM", k_flist(b, key), 1, id) == 0 then return false end
  FQ_ADDED = FQ_ADDED - 1
  return true
end

-- fc_flush writes what this call's flow work left: the list count, wake
-- tokens for freed slots and new work. It runs after every script's body
-- and costs nothing when the call did no flow work.
local function fc_flush()
  if REL_N > 0 then fc_after_release() end
  for _, c in ipairs(CACHES) do c.flush() end
  fc_flush_enqueue()
end
`

// luaFlowClaim is fc_claim and its helpers, the end of flow control's
// library.
const luaFlowClaim = `
-- fc_requeue moves the task of e, an undelivered entry of band b's stream,
-- to its key list, if the entry is still the task's.
local function fc_requeue(F, b, e)
  local t = ""
  for j = 1, #e[2], 2 do if e[2][j] == "t" then t = e[2][j + 1] end end
  local tk = k_task(t)
  local h = redis.call("HMGET", tk, "state", "msg", "fk", "available_at", "created_at")
  if h[1] == "Queued" and h[2] == e[1] then
    redis.call("HSET", tk, "msg", "", "fq", "1")
    fc_enqueue(F, b, h[3] or "", t, h[4] or h[5])
  end
end

-- fc_migrate moves stream entries that wait undelivered in a flow queue's
-- bands (those from before flow control was enabled) into the key lists, up
-- to 256 per band, reading them as consumer and deleting them. Returns the
-- bands that had more (their admission waits for the next call).
local function fc_migrate(F, consumer)
  local full = {}
  for b = 9, 0, -1 do
    local r = redis.call("XREADGROUP", "GROUP", GROUP, consumer, "COUNT", 256, "STREAMS", k_stream(b), ">")
    local es = r and r[1][2] or {}
    local ids = {}
    for _, e in ipairs(es) do
      ids[#ids + 1] = e[1]
      fc_requeue(F, b, e)
    end
    if #ids > 0 then
      redis.call("XACK", k_stream(b), GROUP, unpack(ids))
      redis.call("XDEL", k_stream(b), unpack(ids))
    end
    if #es >= 256 then full[b] = true end
  end
  if next(full) == nil then redis.call("DEL", K_FMIG) end
  fc_flush_ready()
  return full
end

-- fc_pick chooses up to allowed tasks to admit, band 9 first, and returns
-- them as {band, task id, task hash, key, task key} plus why it stopped short
-- (keyWhy: "KeyConcurrency" or "KeyRateLimit" when keys were parked) and
-- whether admissible work may be left (it filled allowed with work behind,
-- or ran out of budget). Within a band it reads the ready set's
-- lowest keys into a window and runs start-time fair queueing there (or
-- FIFO by head task), writing the scores back once per band: a key at its
-- cap or over its rate is parked (out of the ready set, never blocking
-- another key), an emptied key leaves with its finish tag. Each step admits
-- a task or takes a key out of the window, and a task popped that is no
-- longer queued (cancelled, expired) is dropped, so the loop is bounded by
-- its budget.
local function fc_pick(F, allowed, skip, now, nowtxt, fnow)
  local picks, keyWhy, more = {}, nil, false
  local budget = 4 * allowed + 16
  for b = 9, 0, -1 do
    if allowed <= 0 or budget <= 0 then break end
    if not skip[b] then
      local rk = k_fready(b)
      -- Windows of the lowest keys, one after the other while slots are
      -- left: a window whose keys all parked or emptied, or whose
      -- keys moved past its last score, gives way to the next.
      -- A window is the slots left plus two keys: every key read costs the
      -- call its score, held count, override and limits, whether picked or
      -- not (8 beyond the slots cost the flow drain row 3.7% more Redis
      -- instructions per task); keys that park make room for the next window.
      local again = true
      while again and allowed > 0 and budget > 0 do
        local m = allowed + 2
        local win = redis.call("ZRANGE", rk, 0, m - 1, "WITHSCORES")
        local keys, score, pos = {}, {}, {}
        for i = 1, #win, 2 do keys[#keys + 1] = win[i]; score[win[i]] = tonumber(win[i + 1]); pos[win[i]] = i end
        if #keys == 0 then break end
        local bound = #keys == m and score[keys[#keys]] or math.huge
        local gone, tags, moved = {}, {}, {}
        HC.prefetch(keys)
        if F.ov then OV.prefetch(keys) end
        if F.krated then
          local rated = {}
          for _, k in ipairs(keys) do if key_limits(F, k).rl > 0 then rated[#rated + 1] = k end end
          KTAT.prefetch(rated)
        end
        -- line: the keys that may still start a task in this window, lowest
        -- score first (ties in the ready set's order, as ZRANGE gave them):
        -- the head is the next to start; a key that started one goes back in
        -- its place while its new score is within bound, and one that parked
        -- or emptied leaves.
        local line = {}
        for i = 1, #keys do line[i] = keys[i] end
        while allowed > 0 and budget > 0 do
          budget = budget - 1
          local key = table.remove(line, 1)
          if not key then break end
          local S = score[key]
          local lim = key_limits(F, key)
          local hk = HC.get(key)
          local room, at = 1, nil
          if lim.rl > 0 then room, at = gcra_room(KTAT.get(key), fnow, lim.rl, lim.rp, lim.rb) end
          if lim.cap > 0 and hk >= lim.cap then
            fc_park(key, b, "c")
            gone[#gone + 1], tags[key], score[key] = key, S, nil
            keyWhy = keyWhy or "KeyConcurrency"
          elseif room == 0 then
            fc_park(key, b, "r")
            redis.call("ZADD", K_FTIMED, fnum(at), key)
            gone[#gone + 1], tags[key], score[key] = key, S, nil
            keyWhy = keyWhy or "KeyRateLimit"
          else
            local id = redis.call("LPOP", k_flist(b, key))
            if not id then
              gone[#gone + 1], tags[key], score[key] = key, S, nil
            else
              FQ_ADDED = FQ_ADDED - 1
              local tk = k_task(id)
              local h = read_task(tk)
              local expires = tonumber(h.expires_at) or 0
              -- Not admitted: a stale entry (not queued in a list any more),
              -- dropped, or a task cancelled or expired while it waited,
              -- finished; the key stays first in line for its next task.
              local out = (h.state ~= "Queued" or (h.msg or "") ~= "") and "stale"
                or h.cancel_requested == "1" and "Cancelled"
                or expires > 0 and tonumber(now) >= expires and "Expired"
              if out then
                if out ~= "stale" then finish(id, out, "Task" .. out, h.attempt, h.ikey, now, nowtxt) end
                table.insert(line, 1, key)
              else
                picks[#picks + 1] = {b, id, h, key, tk}
                allowed = allowed - 1
                HC.set(key, hk + 1)
                if lim.rl > 0 then KTAT.set(key, gcra_take(KTAT.get(key), fnow, lim.rl, lim.rp, 1)) end
                if F.fifo then
                  local t = head_time(b, key)
                  if t then score[key] = t else gone[#gone + 1], score[key] = key, nil end
                else
                  VT[b], VT_SET[b] = S, true
                  score[key] = S + 1000 / lim.w
                end
                local s = score[key]
                if s then
                  moved[key] = true
                  if s <= bound then
                    local j, p = 1, pos[key]
                    while line[j] and (score[line[j]] < s or (score[line[j]] == s and pos[line[j]] < p)) do j = j + 1 end
                    table.insert(line, j, key)
                  end
                end
              end
            end
          end
        end
        -- Write the window back: keys out with their tags kept, the others
        -- at their new scores.
        if #gone > 0 then
          redis.call("ZREM", rk, unpack(gone))
          if not F.fifo then
            local z = {}
            for _, k in ipairs(gone) do if tags[k] then z[#z + 1] = fnum(tags[k]); z[#z + 1] = k end end
            if #z > 0 then
              redis.call("ZADD", k_ffin(b), unpack(z))
              redis.call("ZREMRANGEBYSCORE", k_ffin(b), "-inf", "(" .. fnum(vtime(b) - 1000))
            end
          end
        end
        local z = {}
        for k in pairs(moved) do if score[k] then z[#z + 1] = fnum(score[k]); z[#z + 1] = k end end
        if #z > 0 then redis.call("ZADD", rk, "XX", unpack(z)) end
        if allowed <= 0 then
          -- Filled: is admissible work left? A key left in the window may
          -- have emptied unnoticed (an emptied key leaves only when popped
          -- again), so up to three of them are looked at, lowest score first:
          -- the line's, then those past bound in the window's order.
          local look = {}
          for i = 1, math.min(3, #line) do look[i] = line[i] end
          for _, k in ipairs(keys) do
            if #look == 3 then break end
            if score[k] and score[k] > bound then look[#look + 1] = k end
          end
          for _, k in ipairs(look) do
            if redis.call("LLEN", k_flist(b, k)) > 0 then more = true; break end
          end
        end
        again = #keys == m and allowed > 0 and budget > 0
      end
    end
  end
  -- Out of budget with slots left: the keys it parked are out of the way,
  -- so a claim now may admit more.
  return picks, keyWhy, more or (budget <= 0 and allowed > 0)
end

-- fc_deliver adds each picked task's entry to its band stream and reads it
-- into consumer's pending list (one XREADGROUP per band), then starts it
-- with start_entry exactly as a read entry at time start, taking its slot.
-- An undelivered entry ahead of them (one no path should leave in a flow
-- queue's stream) is moved to its key list on the way.
local function fc_deliver(F, picks, consumer, worker, start, nowtxt)
  local out, byBand, held = {}, {}, {}
  for _, p in ipairs(picks) do
    local b = p[1]
    p[6] = redis.call("XADD", k_stream(b), "*", "t", p[2], "a", p[3].attempt)
    local ids = byBand[b]
    if not ids then ids = {}; byBand[b] = ids end
    ids[#ids + 1] = p[6]
  end
  -- This call's entries come last in their band's stream, in the order
  -- they were added: what the read returns before them is not theirs.
  for b, ids in pairs(byBand) do
    local i = 1
    while i <= #ids do
      local r = redis.call("XREADGROUP", "GROUP", GROUP, consumer, "COUNT", #ids - i + 1, "STREAMS", k_stream(b), ">")
      if not r then break end
      for _, e in ipairs(r[1][2]) do
        if e[1] == ids[i] then
          i = i + 1
        else
          fc_requeue(F, b, e)
          redis.call("XACK", k_stream(b), GROUP, e[1])
          redis.call("XDEL", k_stream(b), e[1])
        end
      end
    end
  end
  for _, p in ipairs(picks) do
    local b, id, h, key, tk, msgid = unpack(p)
    local r = try(start_entry, tk, k_stream(b), msgid, tonumber(h.attempt), "0", worker, start, nowtxt, h)
    if r[1] == "run" then
      held[#held + 1] = id
      held[#held + 1] = key
    else
      HC.set(key, HC.get(key) - 1)
    end
    out[#out + 1] = start_reply(b, msgid, id, h.attempt, r)
  end
  return out, held
end

-- fc_timer returns the delay (us) a worker refused by a time limit waits
-- before it claims again, or -1: one worker at a time waits on the timer (it
-- holds fc:timer until the time passes); the others wait for a wake token,
-- so a rate tick wakes one worker, not all.
local function fc_timer(worker, at, fnow)
  local d = math.max(at - fnow, 1000)
  local ms = math.ceil(d / 1000) + 100
  local holder = redis.call("SET", K_FTIMER, worker, "NX", "GET", "PX", ms)
  if holder and holder ~= worker then return -1 end
  if holder then redis.call("PEXPIRE", K_FTIMER, ms) end
  return d
end

-- fc_end removes a queue's flow state once flow control was removed and its
-- key lists are empty: the claim is a plain read again. The slots of tasks
-- still running (fc:held, fc:hc) stay until they end.
local function fc_end()
  redis.call("DEL", K_FLOW, K_FMIG, K_FS, K_FTAT, K_FPARK, K_FTIMED, K_FO, K_FWAKE, K_FTIMER)
  for b = 0, 9 do redis.call("DEL", k_fready(b), k_ffin(b)) end
end

-- fc_claim is readStartScript on a flow-controlled queue (flowtxt is its
-- flow key; mig set while pre-flow stream entries wait to move): the queue's
-- gates (maxConcurrency, then the rate), fc_pick, fc_deliver, then the
-- slots, rates and virtual times written once. Returns {"ok", entries} as
-- readStartScript; {"again"} when it did work but admitted nothing (call
-- again now); or {"wait", delay us or -1, limit} when the limits admit
-- nothing now ("" limit: nothing queued).
local function fc_claim(flowtxt, mig, consumer, count, worker, now, nowtxt)
  local F = flow_parse(flowtxt)
  FLOW_CFG = F
  -- The clock and the rate-parked keys only matter when a rate is set. A
  -- rate admits by its clock, so the starts of such a claim are stamped
  -- with it (started_at, TaskStarted), not with the worker's now: recorded
  -- starts obey the rate whatever the worker's clock or how long the call
  -- waited in Redis's queue. The rest of the call (the cancels and expiries
  -- the pick finishes) keeps the worker's now.
  local fnow = (F.rl > 0 or F.krated) and flow_now() or 0
  local start = fnow > 0 and int(math.floor(fnow / 1000)) or now
  local skip = mig and fc_migrate(F, consumer) or {}
  local allowed, why, at = count, nil, nil
  if F.maxc > 0 then
    local free = F.maxc - redis.call("HLEN", K_FHELD)
    if free < allowed then
      allowed = math.max(free, 0)
      if allowed == 0 then why = "MaxConcurrency" end
    end
  end
  local qtat
  if F.rl > 0 and allowed > 0 then
    qtat = tonumber(redis.call("HGET", K_FS, "tat")) or 0
    local room, next = gcra_room(qtat, fnow, F.rl, F.rp, F.rb)
    if room < allowed then
      allowed = room
      if room == 0 then why, at = "RateLimit", next end
    end
  end
  local out, held, keyWhy, more = {}, {}, nil, false
  if allowed > 0 then
    local due = F.krated and redis.call("ZRANGEBYSCORE", K_FTIMED, "-inf", fnum(fnow), "LIMIT", 0, 100) or {}
    if #due > 0 then
      redis.call("ZREM", K_FTIMED, unpack(due))
      for _, key in ipairs(due) do fc_unpark(F, key) end
    end
    local picks
    picks, keyWhy, more = fc_pick(F, allowed, skip, now, nowtxt, fnow)
    out, held = fc_deliver(F, picks, consumer, worker, start, nowtxt)
  end
  if #held > 0 then
    redis.call("HSET", K_FHELD, unpack(held))
    if F.rl > 0 then redis.call("HSET", K_FS, "tat", fnum(gcra_take(qtat, fnow, F.rl, F.rp, #held / 2))) end
  end
  local v = {}
  for b in pairs(VT_SET) do v[#v + 1] = "v" .. b; v[#v + 1] = fnum(VT[b]) end
  if #v > 0 then redis.call("HSET", K_FS, unpack(v)) end
  if #out > 0 then
    -- A worker that filled every slot it asked for leaves admissible work
    -- to the next one: one token wakes it.
    if #out == count and more then WAKE = WAKE + 1 end
    if F.rl > 0 and #out == count and redis.call("GET", K_FTIMER) == worker then
      redis.call("DEL", K_FTIMER)
      WAKE = WAKE + 1
    end
    return {"ok", out}
  end
  if why == nil and (more or (keyWhy == nil and FQ_ADDED < 0)) then return {"again"} end
  why = why or keyWhy
  if why ~= "RateLimit" then
    local t = redis.call("ZRANGE", K_FTIMED, 0, 0, "WITHSCORES")
    if t[2] then at = tonumber(t[2]) end
  end
  if at then return {"wait", fnum(fc_timer(worker, at, flow_now())), why or ""} end
  return {"wait", "-1", why or ""}
end
`

// luaFlowExports is the table of flow control's library that fc returns.
const luaFlowExports = `{enqueue = fc_enqueue, flush_enqueue = fc_flush_enqueue, release = fc_release, charge = fc_charge,
  unlist = fc_unlist, claim = fc_claim, remove = fc_end, flush = fc_flush}`

// luaFlowLazy defines fc_build, the builder of flow control's library, right
// after luaHead: a closure made there captures its upvalues while few
// others are open, which costs a script call a fraction of what it does at
// the end of luaLib (the library's functions reach the engine's helpers
// through the locals luaFlowState declares).
var luaFlowLazy = "fc_build = function()\n" + luaFlowKeys() + luaFlowEnqueue + luaFlow + luaFlowClaim + "\nreturn " + luaFlowExports + "\nend\n"

// luaFlowEager is flow control's library defined at the top level after
// luaEngine, for the scripts of flowScript, whose bodies use its parts (HC, fc_unpark, ...).
var luaFlowEager = luaFlowKeys() + luaFlowEnqueue + luaFlow + luaFlowClaim + "\nFCL = " + luaFlowExports + "\n"

// luaFlowEnqueueLazy defines fc_build with fc_enqueue's part of the library
// only, for submitBatchScript.
var luaFlowEnqueueLazy = "fc_build = function()\n" + luaFlowKeys() + luaFlowEnqueue + "\nreturn {enqueue = fc_enqueue, flush_enqueue = fc_flush_enqueue}\nend\n"

// The wake group's consumer: every waiting worker reads tokens under this
// one name (NOACK, so nothing is pending for it).
const flowWaiter = "waiter"

// flowConfigScript writes a queue's flow control (EnsureQueue): the limits
// into the config's flow field (read by submit, complete and the scripts
// that queue a task again) and into the flow key (read by the claim), and
// the overrides into fc:o, all at once. A change returns every parked key to
// its bands (the claim checks it against the new limits); a change of
// fairness re-scores the ready sets. Enabling sets fc:mig, so the claim moves
// the streams' undelivered entries into the key lists, and creates the wake
// stream. Removing flow control leaves the flow key "off" while tasks wait
// in key lists (the claim serves them without limits, then ends the flow
// state: fc_end), or ends it now.
//
// KEYS[1]        -> dtq:{<ns>/<q>}:config
// KEYS[2]        -> dtq:{<ns>/<q>}:flow
// KEYS[3]        -> dtq:{<ns>/<q>}:fc:o
// KEYS[4]        -> dtq:{<ns>/<q>}:fc:mig
// KEYS[5]        -> dtq:{<ns>/<q>}:fc:wake
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> the limits (flowText; "" none)
// ARGV[3..]      -> overrides: key, "weight cap limit period_us burst", ...
//
// Returns "none" (no flow control, none before), "off", "same" or "changed".
var flowConfigScript = flowScript(`
local old, new = redis.call("GET", KEYS[2]), ARGV[2]
local function unpark_all(F)
  local p = redis.call("HGETALL", K_FPARK)
  for i = 1, #p, 2 do fc_unpark(F, p[i]) end
  redis.call("DEL", K_FTIMED)
end
if new == "" then
  redis.call("HDEL", KEYS[1], "flow")
  if not old then return "none" end
  if old ~= "off" then
    FLOW_CFG = flow_parse("off")
    unpark_all(FLOW_CFG)
    redis.call("DEL", KEYS[3])
    fc_wake(8) -- workers waiting on a limit claim again, without limits
    WAKE = 0
    if (tonumber(redis.call("HGET", K_FS, "n")) or 0) > 0 then redis.call("SET", KEYS[2], "off") else fc_end() end
  end
  return "off"
end
redis.call("HSET", KEYS[1], "flow", new)
if old == new then return "same" end
redis.call("SET", KEYS[2], new)
redis.call("DEL", KEYS[3])
if #ARGV > 2 then
  redis.call("HSET", KEYS[3], unpack(ARGV, 3))
  -- More than a few overrides: make fc:o a hash table for good. Redis
  -- keeps a small hash as a listpack, which every HGET scans field by
  -- field (the claim looks up each key it considers); a value longer than
  -- hash-max-listpack-value (64 bytes unless configured) converts it. " "
  -- is no flow key, and its value is no override (parseFlow skips it).
  if #ARGV > 2 + 2 * 8 then redis.call("HSET", KEYS[3], " ", string.rep("-", 256)) end
end
if not old or old == "off" then
  redis.call("SET", KEYS[4], "1")
  pcall(redis.call, "XGROUP", "CREATE", KEYS[5], "` + flowWakeGroup + `", "$", "MKSTREAM")
  -- Workers blocked on the streams (a plain queue's wait) wake on a new
  -- entry, deleted at once (it would count against maxDepth): they claim
  -- under the limits now.
  redis.call("XDEL", k_stream(0), redis.call("XADD", k_stream(0), "*", "t", "", "a", "0"))
end
local F, was = flow_parse(new), flow_parse(old)
FLOW_CFG = F
if was and was.fifo ~= F.fifo then
  for b = 0, 9 do
    local keys = redis.call("ZRANGE", k_fready(b), 0, -1)
    for _, key in ipairs(keys) do
      local s = F.fifo and head_time(b, key) or vtime(b)
      if s then redis.call("ZADD", k_fready(b), "XX", fnum(s), key) else redis.call("ZREM", k_fready(b), key) end
    end
    redis.call("DEL", k_ffin(b))
  end
end
unpark_all(F)
return "changed"
`)

// flowScanKeys is how many keys per band the read-only flow scripts
// (metrics, FlowKeys) look at; a queue with more keys in a band has its
// metrics estimated from them.
const flowScanKeys = 1000

// luaFlowScan is scan_keys for the read-only flow scripts.
var luaFlowScan = `
-- scan_keys returns the keys with queued tasks, as {key -> {ready = tasks in
-- bands where it is ready, parked = tasks in bands it left, bands = {band ->
-- tasks}}}, reading up to ` + strconv.Itoa(flowScanKeys) + ` ready keys per band and
-- every parked key, one LLEN per (band, key); and the tasks per band.
local function scan_keys()
  local keys, bandq = {}, {}
  local function add(key, b, ready)
    local q = redis.call("LLEN", k_flist(b, key))
    local k = keys[key]
    if not k then
      k = {ready = 0, parked = 0, bands = {}}
      keys[key] = k
    end
    if ready then k.ready = k.ready + q else k.parked = k.parked + q end
    k.bands[b] = q
    bandq[b + 1] = bandq[b + 1] + q
  end
  local park = redis.call("HGETALL", K_FPARK)
  for i = 1, #park, 2 do PARK[park[i]] = park[i + 1] end
  for b = 0, 9 do
    bandq[b + 1] = 0
    for _, key in ipairs(redis.call("ZRANGE", k_fready(b), 0, SCAN_KEYS - 1)) do
      PARK[key] = PARK[key] or false
      add(key, b, true)
    end
  end
  for i = 1, #park, 2 do
    for b in string.gmatch(string.sub(park[i + 1], 2), "%d") do add(park[i], tonumber(b), false) end
  end
  return keys, bandq, park
end
`

// flowMetricsScript reads a flow-controlled queue's share of QueueMetrics
// (read only; its rate clock is TIME): tasks in key lists, held slots, the
// tasks the limits admit now (each ready key's queued tasks up to its free
// slots and its rate's room), the keys, the limits holding work back (most
// tasks held back first) and the queued tasks per band. Keys beyond
// flowScanKeys per band are estimated as the scanned ones.
//
// KEYS[1]        -> dtq:{<ns>/<q>}:flow (routes the call to the queue's slot)
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> rate clock, Unix us ("": TIME; tests only)
//
// Returns {} without flow control, else {tasks in lists, held, admissible,
// active keys, parked keys, {limit...}, {tasks per band p0..p9}}.
var flowMetricsScript = flowScript(`
FLOW_CLOCK = ARGV[2]
local SCAN_KEYS = ` + strconv.Itoa(flowScanKeys) + `
` + luaFlowScan + `
local F = flow_parse(redis.call("GET", K_FLOW))
if not F then return {} end
local fnow = flow_now()
local n = tonumber(redis.call("HGET", K_FS, "n")) or 0
local held = redis.call("HLEN", K_FHELD)
local keys, bandq, park = scan_keys()
local admissible, counted, active, capBack, rateBack = 0, 0, 0, 0, 0
for key, k in pairs(keys) do
  if k.ready + k.parked > 0 then active = active + 1 end
  counted = counted + k.ready + k.parked
  local l = key_limits(F, key)
  local adm = k.ready
  if l.cap > 0 then adm = math.min(adm, math.max(0, l.cap - HC.get(key))) end
  capBack = capBack + k.ready - adm
  if l.rl > 0 and adm > 0 then
    local room = gcra_room(KTAT.get(key), fnow, l.rl, l.rp, l.rb)
    rateBack = rateBack + adm - math.min(adm, room)
    adm = math.min(adm, room)
  end
  local p = parked(key)
  if p and string.sub(p, 1, 1) == "c" then capBack = capBack + k.parked else rateBack = rateBack + k.parked end
  admissible = admissible + adm
end
if counted > 0 and counted < n then
  -- More keys than were scanned: the rest is taken to be like the scanned.
  admissible = math.floor(admissible * n / counted)
  capBack, rateBack = math.floor(capBack * n / counted), math.floor(rateBack * n / counted)
  local top = 1
  for b = 2, 10 do if bandq[b] > bandq[top] then top = b end end
  bandq[top] = bandq[top] + n - counted
end
local limits = {}
if F.maxc > 0 and F.maxc - held < admissible then limits[#limits + 1] = {"MaxConcurrency", admissible - math.max(0, F.maxc - held)} end
if F.rl > 0 and n > 0 then
  local room = gcra_room(tonumber(redis.call("HGET", K_FS, "tat")) or 0, fnow, F.rl, F.rp, F.rb)
  if room < admissible then limits[#limits + 1] = {"RateLimit", admissible - room} end
end
if capBack > 0 then limits[#limits + 1] = {"KeyConcurrency", capBack} end
if rateBack > 0 then limits[#limits + 1] = {"KeyRateLimit", rateBack} end
table.sort(limits, function(a, b) return a[2] > b[2] end)
local names = {}
for i, l in ipairs(limits) do names[i] = l[1] end
return {n, held, admissible, active, #park / 2, names, bandq}
`)

// flowKeysScript lists a flow-controlled queue's keys (read only): those
// with queued tasks (up to flowScanKeys per band) or held slots, each with
// its tasks, slots, cap, weight, parking and when a rate-parked key may
// start again (us).
//
// KEYS[1]        -> dtq:{<ns>/<q>}:flow (routes the call to the queue's slot)
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
//
// Returns {} without flow control, else {{key, queued, held, cap, weight,
// parked reason ("c", "r" or ""), eligible us or ""}...}.
var flowKeysScript = flowScript(`
local SCAN_KEYS = ` + strconv.Itoa(flowScanKeys) + `
` + luaFlowScan + `
local F = flow_parse(redis.call("GET", K_FLOW))
if not F then return {} end
local keys = scan_keys()
local hc = redis.call("HGETALL", K_FHC)
for i = 1, #hc, 2 do
  HC.v[hc[i]] = tonumber(hc[i + 1])
  keys[hc[i]] = keys[hc[i]] or {ready = 0, parked = 0}
end
local out = {}
for key, k in pairs(keys) do
  local l = key_limits(F, key)
  local p = parked(key)
  local reason, at = p and string.sub(p, 1, 1) or "", ""
  if reason == "r" then at = redis.call("ZSCORE", K_FTIMED, key) or "" end
  out[#out + 1] = {key, k.ready + k.parked, HC.get(key), l.cap, l.w, reason, at}
end
return out
`)

// flowWaitScript says why a queued task of a flow-controlled queue waits
// (GetTask's TaskInfo.WaitReason; read only).
//
// KEYS[1]        -> dtq:{<ns>/<q>}:paused
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
// ARGV[2]        -> task id
// ARGV[3]        -> its band
// ARGV[4]        -> its flow key
// ARGV[5]        -> rate clock, Unix us ("": TIME; tests only)
//
// Returns the reason ("" when the queue has no flow control).
var flowWaitScript = flowScript(`
FLOW_CLOCK = ARGV[5]
local id, b, key = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local F = flow_parse(redis.call("GET", K_FLOW))
if not F or F.off then return "" end
if redis.call("EXISTS", KEYS[1]) == 1 then return "queue paused" end
local function period(us)
  if us % 1000000 == 0 then return (us / 1000000) .. "s" end
  if us % 1000 == 0 then return (us / 1000) .. "ms" end
  return us .. "us"
end
local name = key == "" and '""' or key
local fnow = flow_now()
local held = redis.call("HLEN", K_FHELD)
if F.maxc > 0 and held >= F.maxc then return string.format("queue at concurrency %d/%d", held, F.maxc) end
if F.rl > 0 then
  local room, at = gcra_room(tonumber(redis.call("HGET", K_FS, "tat")) or 0, fnow, F.rl, F.rp, F.rb)
  if room == 0 then
    return string.format("queue at rate limit %d/%s (next start in %dms)", F.rl, period(F.rp), math.ceil((at - fnow) / 1000))
  end
end
local l = key_limits(F, key)
local hk = HC.get(key)
if l.cap > 0 and hk >= l.cap then return string.format("key %s at concurrency %d/%d", name, hk, l.cap) end
if l.rl > 0 then
  local room, at = gcra_room(KTAT.get(key), fnow, l.rl, l.rp, l.rb)
  if room == 0 then
    return string.format("key %s at rate limit %d/%s (next start in %dms)", name, l.rl, period(l.rp), math.ceil((at - fnow) / 1000))
  end
end
local pos = redis.call("LPOS", k_flist(b, key), id)
if pos and pos > 0 then return string.format("behind %d tasks of key %s", pos, name) end
return string.format("next of key %s, waiting for its turn among the keys and a free worker", name)
`)

// flowReconcileScript checks a flow-controlled queue's slots against its
// tasks (ReconcileFlowSlots): a slot whose task is not Running is given back
// (fc_release, which also returns parked keys and wakes workers), the
// per-key counts are rebuilt from the slots, and a key parked at its cap
// that is below it returns to its bands.
//
// KEYS[1]        -> dtq:{<ns>/<q>}:flow (routes the call to the queue's slot)
//
// ARGV[1]        -> key prefix dtq:{<ns>/<q>}:
//
// Returns {slots given back, per-key counts corrected}.
var flowReconcileScript = flowScript(`
local held = redis.call("HGETALL", K_FHELD)
local gone, per = {}, {}
for i = 1, #held, 2 do
  local id, key = held[i], held[i + 1]
  if redis.call("HGET", k_task(id), "state") ~= "Running" then
    gone[#gone + 1] = id
  else
    per[key] = (per[key] or 0) + 1
  end
end
local hc = redis.call("HGETALL", K_FHC)
for i = 1, #hc, 2 do HC.v[hc[i]] = tonumber(hc[i + 1]) end
fc_release(gone)
local fixed = 0
for i = 1, #hc, 2 do
  local key = hc[i]
  if HC.get(key) ~= (per[key] or 0) then
    fixed = fixed + 1
    HC.set(key, per[key] or 0)
  end
  per[key] = nil
end
for key, n in pairs(per) do
  fixed = fixed + 1
  HC.set(key, n)
end
local F = flow_cfg()
if F then
  local park = redis.call("HGETALL", K_FPARK)
  for i = 1, #park, 2 do
    local cap = key_limits(F, park[i]).cap
    if string.sub(park[i + 1], 1, 1) == "c" and (cap == 0 or HC.get(park[i]) < cap) then
      if fc_unpark(F, park[i]) then WAKE = WAKE + 1 end
    end
  end
end
return {#gone, fixed}
`)
