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

// Every key of one queue starts with dtq:{<namespace>/<queue>}: so it hashes to
// the queue's slot on Redis Cluster. This file is the only place key names are
// spelled; the Lua scripts build the same names from the prefix they get in
// ARGV (see keyHelpers in scripts.go).

// Bands is the number of priority bands (streams) per queue, p0..p9.
const Bands = 10

// group is the consumer group of every band stream.
const group = "workers"

// keys builds the key names of one queue.
type keys struct{ prefix string }

func keysFor(q QueueRef) keys { return keys{prefix: "dtq:{" + q.String() + "}:"} }

// Prefix is the common prefix of all of a queue's keys, e.g. "dtq:{ns/q}:".
func (k keys) Prefix() string { return k.prefix }

func (k keys) stream(band int) string        { return k.prefix + "stream:p" + strconv.Itoa(band) }
func (k keys) task(id string) string         { return k.prefix + "task:" + id }
func (k keys) result(id string) string       { return k.prefix + "result:" + id }
func (k keys) idempotency(key string) string { return k.prefix + "idempotency:" + key }
func (k keys) schedule() string              { return k.prefix + "schedule" }
func (k keys) deadLetter() string            { return k.prefix + "dead-letter" }
func (k keys) events() string                { return k.prefix + "events" }
func (k keys) paused() string                { return k.prefix + "paused" }
func (k keys) config() string                { return k.prefix + "config" }
func (k keys) workers() string               { return k.prefix + "workers" }
func (k keys) worker(id string) string       { return k.prefix + "worker:" + id }
func (k keys) stats() string                 { return k.prefix + "stats" }
func (k keys) taskIndex() string             { return k.prefix + "tasks" }

// namespaceQueues is the set of the queue names of namespace ns that
// EnsureQueue registered (see Queues). It is the one key outside any queue's
// hash tag: its own tag is the namespace.
func namespaceQueues(ns string) string { return "dtq:{" + ns + "}:queues" }

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

// EventsMaxLen is the approximate cap (MAXLEN ~) of a queue's events stream.
const EventsMaxLen = 10000

const eventsMaxLenText = "10000"
