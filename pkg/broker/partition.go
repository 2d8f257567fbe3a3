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
	"hash/fnv"
	"strconv"
)

// These functions place a queue split into n partitions: each partition is
// a queue's worth of keys under a hash tag of its own, so that on Redis
// Cluster the partitions can live on n masters. Partition p of queue q is
// the queue q.Partition(p, n), whose tag is "<ns>/<q>#<p>.<s>": '#' cannot
// occur in a Kubernetes name, so no partition's keys are another queue's;
// with n = 1 the one partition is q itself, today's layout. A keyed task
// belongs in partition PartitionOf(key, n), beside its idempotency record:
// every producer computes the same partition for a key, so every
// submission of the key meets one record. Nothing in the engine, the API or
// the operator splits a queue yet: their one user is test/bench's
// partitions experiment (docs/benchmarks.md, "Partitioned queues").

// PartitionOf returns the partition (0..n-1) of a task with idempotency key
// (or fixed ID) key in a queue of n partitions: a jump consistent hash of
// the key's 64-bit FNV-1a hash, domain-separated ("dtq-partition\x00" +
// key). It is part of the Redis layout: producers in other languages must
// compute the same, and the golden values of TestPartitionOf may never
// change. n <= 1 returns 0.
func PartitionOf(key string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte("dtq-partition\x00"))
	_, _ = h.Write([]byte(key))
	return jump(h.Sum64(), n)
}

// jump is Lamping and Veach's jump consistent hash ("A Fast, Minimal Memory,
// Consistent Hash Algorithm", 2014): growing n to n+1 moves 1/(n+1) of the
// keys, each to the new bucket.
func jump(key uint64, n int) int {
	b, j := int64(-1), int64(0)
	for j < int64(n) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// Partition returns partition p of q's n partitions: q itself when n <= 1,
// else the queue named "<q>#<p>.<s>", where s is the smallest number that
// puts the partition's hash slot in the middle half of the p-th of n equal
// arcs of the 16384 slots. A cluster whose masters own equal runs of slots
// in order (as `redis-cli --cluster create` and rediscluster.Form split
// them) then holds n/m partitions on each of its m masters when m divides
// n, where tags left to chance put 3 partitions on 3 masters 2 times in 9.
func (q QueueRef) Partition(p, n int) QueueRef {
	if n <= 1 {
		return q
	}
	base := q.Name + "#" + strconv.Itoa(p) + "."
	for s := 0; ; s++ {
		name := base + strconv.Itoa(s)
		// slot/(slots/n) - p in [1/4, 3/4), in integers
		if at := 4 * (n*keySlot(q.Namespace+"/"+name) - p*slots); at >= slots && at < 3*slots {
			return QueueRef{Namespace: q.Namespace, Name: name}
		}
	}
}

// slots is the number of Redis Cluster hash slots.
const slots = 16384

// keySlot returns the Redis Cluster hash slot of a key whose hash tag is
// tag (CRC16-XMODEM mod 16384, as CLUSTER KEYSLOT).
func keySlot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % slots
}
