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
	"testing"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// The partition of a key is part of the Redis layout: these values may
// never change, or submissions of one key would meet two records.
func TestPartitionOf(t *testing.T) {
	for _, c := range []struct {
		key  string
		want [4]int // n = 2, 3, 12, 64
	}{
		{"", [4]int{1, 2, 2, 12}},
		{"a", [4]int{1, 1, 6, 34}},
		{"order-1", [4]int{0, 0, 0, 27}},
		{"order-2", [4]int{0, 2, 7, 7}},
		{"tenant-0042", [4]int{0, 2, 7, 54}},
		{"käse", [4]int{0, 0, 6, 22}},
	} {
		for i, n := range []int{2, 3, 12, 64} {
			if got := PartitionOf(c.key, n); got != c.want[i] {
				t.Errorf("PartitionOf(%q, %d) = %d, want %d", c.key, n, got, c.want[i])
			}
		}
		if got := PartitionOf(c.key, 1); got != 0 {
			t.Errorf("PartitionOf(%q, 1) = %d, want 0", c.key, got)
		}
	}
}

// Keys spread evenly, and one more partition takes keys only for itself.
func TestPartitionOfSpreadsAndGrowsMinimally(t *testing.T) {
	const keys = 30000
	count := make([]int, 3)
	moved := 0
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		p := PartitionOf(k, 3)
		count[p]++
		if q := PartitionOf(k, 4); q != p {
			moved++
			if q != 3 {
				t.Fatalf("%s moved from %d to %d growing 3 partitions to 4, want to 3 only", k, p, q)
			}
		}
	}
	for p, c := range count {
		if c < keys/3*9/10 || c > keys/3*11/10 {
			t.Errorf("partition %d of 3 has %d of %d keys, want within 10%% of %d", p, c, keys, keys/3)
		}
	}
	if moved < keys/4*9/10 || moved > keys/4*11/10 {
		t.Errorf("%d of %d keys moved growing 3 partitions to 4, want about a quarter", moved, keys)
	}
}

func TestKeySlot(t *testing.T) {
	// The CRC16 check value, and Redis's documented example.
	for tag, want := range map[string]int{"123456789": 0x31c3, "foo": 12182} {
		if got := keySlot(tag); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", tag, got, want)
		}
	}
}

// Each partition's slot is in the middle half of its arc, and one
// partition is the queue itself.
func TestPartitionStriping(t *testing.T) {
	q := QueueRef{Namespace: "team-a", Name: "orders"}
	if got := q.Partition(0, 1); got != q {
		t.Fatalf("Partition(0, 1) = %v, want the queue itself", got)
	}
	// Names are part of the layout too.
	for p, want := range []string{"q#0.21", "q#1.20", "q#2.20"} {
		if got := (QueueRef{Namespace: "ns", Name: "q"}).Partition(p, 3).Name; got != want {
			t.Errorf("partition %d of ns/q's 3 is %s, want %s", p, got, want)
		}
	}
	for n := 2; n <= 64; n++ {
		seen := map[string]bool{}
		for p := range n {
			pq := q.Partition(p, n)
			if err := validQueue(pq); err != nil {
				t.Fatal(err)
			}
			arc := float64(slots) / float64(n)
			at := (float64(keySlot(pq.String())) - float64(p)*arc) / arc
			if at < 0.25-1e-9 || at >= 0.75-1e-9 {
				t.Fatalf("partition %d of %d (%s) is at %.2f of its arc, want the middle half", p, n, pq, at)
			}
			if seen[pq.Name] {
				t.Fatalf("partition %d of %d repeats %s", p, n, pq)
			}
			seen[pq.Name] = true
		}
	}
}

// On a cluster whose masters own equal runs of slots, the partitions
// spread evenly: Redis itself says where each partition's keys hash.
func TestPartitionPlacementOnCluster(t *testing.T) {
	cc := redistest.StartCluster(t, 3)
	shards, err := cc.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	owner := func(slot int) string {
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if int64(slot) >= r.Start && int64(slot) <= r.End {
					return fmt.Sprintf("%s:%d", sh.Nodes[0].IP, sh.Nodes[0].Port) // one master per shard
				}
			}
		}
		t.Fatalf("no master owns slot %d", slot)
		return ""
	}
	q := QueueRef{Namespace: "team-a", Name: "orders"}
	for _, c := range []struct{ n, lo, hi int }{{3, 1, 1}, {12, 4, 4}, {64, 21, 22}} {
		per := map[string]int{}
		for p := range c.n {
			pq := q.Partition(p, c.n)
			slot, err := cc.ClusterKeySlot(ctx, keysFor(pq).task("x")).Result()
			if err != nil {
				t.Fatal(err)
			}
			if int(slot) != keySlot(pq.String()) {
				t.Fatalf("%s: Redis says slot %d, keySlot %d", pq, slot, keySlot(pq.String()))
			}
			per[owner(int(slot))]++
		}
		if len(per) != 3 {
			t.Errorf("%d partitions on %d masters (%v), want all 3", c.n, len(per), per)
		}
		for m, k := range per {
			if k < c.lo || k > c.hi {
				t.Errorf("%d partitions: master %s holds %d, want %d..%d", c.n, m, k, c.lo, c.hi)
			}
		}
	}
}
