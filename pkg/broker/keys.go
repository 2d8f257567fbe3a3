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
	"strconv"
	"strings"
)

// Every key of one queue starts with dtq:{<namespace>/<queue>}: so it hashes to
// the queue's slot on Redis Cluster. This file is the only place key names are
// spelled: Go builds the keys it passes to the scripts as KEYS with the methods
// of keys, and the scripts build the keys that depend on what they read (the
// task of an idempotency record, a task's band stream) with the Lua builders
// that luaKeys renders from the same suffixes.

// Bands is the number of priority bands (streams) per queue, p0..p9.
const Bands = 10

// group is the consumer group of every band stream.
const group = "workers"

// The suffixes after a queue's prefix.
const (
	sufStream      = "stream:p" // + band 0..9
	sufTask        = "task:"    // + task id
	sufResult      = "result:"  // + task id
	sufIdempotency = "idempotency:"
	sufSchedule    = "schedule"
	sufDeadLetter  = "dead-letter"
	sufEvents      = "events"
	sufPaused      = "paused"
	sufConfig      = "config"
	sufWorkers     = "workers"
	sufWorker      = "worker:" // + worker id
	sufStats       = "stats"
	sufTaskIndex   = "tasks"
	sufHistory     = "history"

	// Flow control (flow.go, flow_scripts.go): the limits, then the
	// per-key structures the claim admits from.
	sufFlow          = "flow"     // string: the queue's limits as the claim reads them, "off" while draining after they were removed
	sufFlowMigrate   = "fc:mig"   // string: set while stream entries from before flow control wait to be moved into the key lists
	sufFlowOverrides = "fc:o"     // hash: key -> "weight cap limit period_us burst"
	sufFlowState     = "fc:s"     // hash: tat (the queue's GCRA), v<band> (virtual time), n (tasks in key lists)
	sufFlowList      = "fc:q:"    // + band + ":" + key: list of task IDs, FIFO
	sufFlowReady     = "fc:r:"    // + band: zset key -> start tag (Weighted) or head task's time (FIFO)
	sufFlowFinish    = "fc:f:"    // + band: zset key -> finish tag of a key out of the ready set
	sufFlowHeld      = "fc:held"  // hash: task id -> key, one per held concurrency slot
	sufFlowHeldCount = "fc:hc"    // hash: key -> slots its tasks hold
	sufFlowKeyTAT    = "fc:tat"   // hash: key -> the key's GCRA theoretical arrival time, us
	sufFlowParked    = "fc:park"  // hash: key -> reason ("c" cap, "r" rate) and the bands it left
	sufFlowTimed     = "fc:timed" // zset: rate-parked key -> when it may start again, us
	sufFlowWake      = "fc:wake"  // stream of wake tokens, read by waiting workers in group flowWakeGroup
	sufFlowTimer     = "fc:timer" // string: the worker that waits on a rate limit's timer (the others wait for tokens)
)

// sufSlotGuard is a key that is never written: every script call on a queue
// declares it last (guarded).
const sufSlotGuard = "slot-guard"

// flowWakeGroup is the consumer group of the wake-token stream.
const flowWakeGroup = "wake"

// keys builds the key names of one queue.
type keys struct{ prefix string }

func keysFor(q QueueRef) keys { return keys{prefix: "dtq:{" + q.String() + "}:"} }

// Prefix is the common prefix of all of a queue's keys, e.g. "dtq:{ns/q}:".
func (k keys) Prefix() string { return k.prefix }

func (k keys) stream(band int) string        { return k.prefix + sufStream + strconv.Itoa(band) }
func (k keys) task(id string) string         { return k.prefix + sufTask + id }
func (k keys) result(id string) string       { return k.prefix + sufResult + id }
func (k keys) idempotency(key string) string { return k.prefix + sufIdempotency + key }
func (k keys) schedule() string              { return k.prefix + sufSchedule }
func (k keys) deadLetter() string            { return k.prefix + sufDeadLetter }
func (k keys) events() string                { return k.prefix + sufEvents }
func (k keys) paused() string                { return k.prefix + sufPaused }
func (k keys) config() string                { return k.prefix + sufConfig }
func (k keys) workers() string               { return k.prefix + sufWorkers }
func (k keys) worker(id string) string       { return k.prefix + sufWorker + id }
func (k keys) stats() string                 { return k.prefix + sufStats }
func (k keys) taskIndex() string             { return k.prefix + sufTaskIndex }
func (k keys) history() string               { return k.prefix + sufHistory }
func (k keys) flow() string                  { return k.prefix + sufFlow }
func (k keys) flowMigrate() string           { return k.prefix + sufFlowMigrate }
func (k keys) flowOverrides() string         { return k.prefix + sufFlowOverrides }
func (k keys) flowHeld() string              { return k.prefix + sufFlowHeld }
func (k keys) flowWake() string              { return k.prefix + sufFlowWake }

// guarded returns ks and, last, the queue's slot guard: a key that never
// exists, declared by every script call on the queue. While the queue's slot
// migrates between Redis Cluster nodes, Redis answers a call that declares
// several keys, one of them missing, with TRYAGAIN on the old node and on the
// new one alike, so no script runs while the queue's keys are split between
// them: a script that found some of its keys gone would fail half-way, its
// earlier writes kept (docs/redis.md, "Resharding a cluster while queues work").
// It appends to ks: pass a slice of the call's own.
func (k keys) guarded(ks ...string) []string { return append(ks, k.prefix+sufSlotGuard) }

func (k keys) flowList(band int, key string) string {
	return k.prefix + sufFlowList + strconv.Itoa(band) + ":" + key
}

// luaKeys is the start of every script: P, the queue's prefix (ARGV[1]), the
// builders of the keys a script derives from what it reads, and the queue
// keys and consumer group it names itself:
//
//	k_task(id), k_result(id), k_idem(key), k_stream(band)
//	K_EVENTS, K_CONFIG, K_DEADLETTER, K_STATS, GROUP
//
// and flow control's count key K_FS (the rest are luaFlowKeys').
func luaKeys() string {
	var b strings.Builder
	b.WriteString("local P = ARGV[1]\n")
	for _, f := range []struct{ name, arg, suffix string }{
		{"k_task", "id", sufTask}, {"k_result", "id", sufResult}, {"k_idem", "key", sufIdempotency}, {"k_stream", "band", sufStream},
	} {
		fmt.Fprintf(&b, "local function %s(%s) return P .. %q .. %s end\n", f.name, f.arg, f.suffix, f.arg)
	}
	fmt.Fprintf(&b, "local K_EVENTS, K_CONFIG, K_DEADLETTER, K_STATS = P .. %q, P .. %q, P .. %q, P .. %q\n", sufEvents, sufConfig, sufDeadLetter, sufStats)
	fmt.Fprintf(&b, "local GROUP = %q\n", group)
	fmt.Fprintf(&b, "local K_FS = P .. %q\n", sufFlowState)
	return b.String()
}

// luaFlowKeys is the rest of flow control's keys and their builders,
// defined where its library is (a script that does not build the library
// does not make them):
//
//	k_flist(band, key), k_fready(band), k_ffin(band)
//	K_FLOW, K_FMIG, K_FO, K_FHELD, K_FHC, K_FTAT, K_FPARK, K_FTIMED, K_FWAKE, K_FTIMER
func luaFlowKeys() string {
	return fmt.Sprintf("local function k_flist(band, key) return P .. %q .. band .. \":\" .. key end\n", sufFlowList) +
		fmt.Sprintf("local function k_fready(band) return P .. %q .. band end\n", sufFlowReady) +
		fmt.Sprintf("local function k_ffin(band) return P .. %q .. band end\n", sufFlowFinish) +
		fmt.Sprintf("local K_FPARK = P .. %q\n", sufFlowParked) +
		fmt.Sprintf("local K_FLOW, K_FMIG, K_FO, K_FHELD, K_FHC = P .. %q, P .. %q, P .. %q, P .. %q, P .. %q\n",
			sufFlow, sufFlowMigrate, sufFlowOverrides, sufFlowHeld, sufFlowHeldCount) +
		fmt.Sprintf("local K_FTAT, K_FTIMED, K_FWAKE, K_FTIMER = P .. %q, P .. %q, P .. %q, P .. %q\n",
			sufFlowKeyTAT, sufFlowTimed, sufFlowWake, sufFlowTimer)
}

// namespaceQueues is the set of the queue names of namespace ns that
// EnsureQueue registered (see Queues). It is the one key outside any queue's
// hash tag: its own tag is the namespace.
func namespaceQueues(ns string) string { return "dtq:{" + ns + "}:queues" }

// componentsKey is the hash of the running managers' and API replicas' builds
// (RecordComponent): one field per process, "<component>/<pod>". It belongs to
// no queue or namespace; the manager and the API write it, workers never do.
const componentsKey = "dtq:components"

// namespaceKeyPattern matches the keys of every queue of ns (keysFor's
// "dtq:{<ns>/<queue>}:" prefixes). Namespaces are DNS labels: they hold no
// glob characters, and "/" ends them.
func namespaceKeyPattern(ns string) string { return "dtq:{" + ns + "/*" }

// AppKeyPrefix is the prefix of the keys a namespace's handlers may use for
// their own state ("dtq:app:<ns>:"), e.g. IdempotentOperation records. The
// namespace's ACL user may use these keys and its queues' keys
// ("dtq:{<ns>/<queue>}:..."), nothing else.
func AppKeyPrefix(namespace string) string { return "dtq:app:" + namespace + ":" }

// streams returns the ten band streams, p0..p9.
func (k keys) streams() []string {
	s := make([]string, Bands)
	for i := range s {
		s[i] = k.stream(i)
	}
	return s
}

// KeyPrefix returns the prefix shared by every key of q ("dtq:{ns/q}:"), for
// tools and tests that inspect a queue's keys.
func KeyPrefix(q QueueRef) string { return keysFor(q).prefix }

// HistoryKey returns the key of q's history (the samples RecordHistory
// appends), for tools and tests that inspect a queue's keys.
func HistoryKey(q QueueRef) string { return keysFor(q).history() }

// EventsMaxLen is the approximate cap (MAXLEN ~) of a queue's events stream.
const EventsMaxLen = 10000

const eventsMaxLenText = "10000"
