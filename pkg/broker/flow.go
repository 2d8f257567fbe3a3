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
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Flow control: limits that hold across every worker of a queue, applied
// inside the claim (docs/flow-control.md). A queue's limits are written by
// EnsureQueue (QueueConfig.Flow) and read by every claim, so a change applies
// at the next claim.

// MaxFlowKeyBytes bounds a flow key: 1..MaxFlowKeyBytes visible ASCII
// characters (0x21..0x7e).
const MaxFlowKeyBytes = 128

// FlowControl is a queue's flow control.
type FlowControl struct {
	Rate           *FlowRate              // task starts (first attempts and retries) per period across all workers; nil: none
	MaxConcurrency int64                  // tasks Running at once across all workers; 0: none
	PerKey         KeyLimits              // the limits of each flow key (tasks without a key share the key "")
	Fairness       Fairness               // how keys share a priority band
	Overrides      map[string]KeyOverride // keys with their own weight or limits
}

// FlowRate is a rate limit: at most Burst + t*Limit/Period starts in any
// interval of length t (GCRA).
type FlowRate struct {
	Limit  int64         // >= 1
	Period time.Duration // >= 1ms
	Burst  int64         // >= 1
}

// KeyLimits are one key's limits; zero values mean none.
type KeyLimits struct {
	Concurrency int64     // tasks of the key Running at once; 0: none
	Rate        *FlowRate // starts of the key; nil: none
}

// KeyOverride is one key's weight and limits. A zero Weight is 1; a zero
// field of KeyLimits falls back to FlowControl.PerKey.
type KeyOverride struct {
	Weight int64 // 1..1000
	KeyLimits
}

// Fairness is how keys with work in one priority band share it.
type Fairness string

const (
	FairnessWeighted Fairness = "Weighted" // start-time fair queueing by weight (default)
	FairnessFIFO     Fairness = "FIFO"     // the key whose head task is oldest first
)

// FlowLimit names a limit that holds work back.
type FlowLimit string

const (
	LimitRate           FlowLimit = "RateLimit"
	LimitMaxConcurrency FlowLimit = "MaxConcurrency"
	LimitKeyConcurrency FlowLimit = "KeyConcurrency"
	LimitKeyRate        FlowLimit = "KeyRateLimit"
)

// FlowMetrics is a flow-controlled queue's share of QueueMetrics.
type FlowMetrics struct {
	Enabled    bool
	Admissible int64         // queued tasks the limits would admit now (keys not parked, up to each key's free slots)
	Throttled  int64         // queued tasks held back by a limit
	Held       int64         // concurrency slots held: flow tasks Running
	ActiveKeys int64         // keys with queued tasks
	ParkedKeys int64         // keys at their concurrency cap or over their rate
	LimitedBy  []FlowLimit   // the limits holding work back now, most binding first
	MeanExec   time.Duration // mean execution time of completed attempts; 0: unknown
	// ExecCount and ExecTotal are the completed attempts and their summed
	// execution time since the queue began (MeanExec = ExecTotal/ExecCount):
	// two reads give the mean of the attempts between them.
	ExecCount int64
	ExecTotal time.Duration
}

// KeyFlow is one flow key's state (Broker.FlowKeys).
type KeyFlow struct {
	Key         string
	Queued      int64
	Held        int64
	Concurrency int64 // the key's cap; 0: none
	Weight      int64
	Parked      FlowLimit // LimitKeyConcurrency or LimitKeyRate while parked; "" otherwise
	EligibleAt  time.Time // when a rate-parked key may start again
}

// MaxFlowOverrides bounds FlowControl.Overrides.
const MaxFlowOverrides = 1000

// MaxFlowWeight bounds a key's weight.
const MaxFlowWeight = 1000

// validFlowKey reports whether k is a flow key: at most MaxFlowKeyBytes of
// visible ASCII (0x21..0x7e: no spaces, so a key travels as an HTTP header
// value and a Kubernetes field as it is); empty only when empty is allowed
// (no key).
func validFlowKey(k string, empty bool) bool {
	if k == "" {
		return empty
	}
	if len(k) > MaxFlowKeyBytes {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// validFlow checks a queue's flow control, naming the field at fault.
func validFlow(f *FlowControl) error {
	if f == nil {
		return nil
	}
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("broker: invalid flow control: %s %s", field, fmt.Sprintf(format, a...))
	}
	rate := func(field string, r *FlowRate) error {
		switch {
		case r == nil:
			return nil
		case r.Limit < 1:
			return bad(field+".limit", "must be at least 1, not %d", r.Limit)
		case r.Period < time.Millisecond:
			return bad(field+".period", "must be at least 1ms, not %v", r.Period)
		case r.Burst < 0:
			return bad(field+".burst", "must be at least 1, not %d", r.Burst)
		}
		return nil
	}
	if err := rate("rateLimit", f.Rate); err != nil {
		return err
	}
	if err := rate("perKey.rateLimit", f.PerKey.Rate); err != nil {
		return err
	}
	switch {
	case f.MaxConcurrency < 0:
		return bad("maxConcurrency", "must not be negative")
	case f.PerKey.Concurrency < 0:
		return bad("perKey.concurrency", "must not be negative")
	case f.Fairness != "" && f.Fairness != FairnessWeighted && f.Fairness != FairnessFIFO:
		return bad("fairness", "must be Weighted or FIFO, not %q", f.Fairness)
	case len(f.Overrides) > MaxFlowOverrides:
		return bad("overrides", "has %d keys, more than %d", len(f.Overrides), MaxFlowOverrides)
	}
	for k, o := range f.Overrides {
		field := fmt.Sprintf("overrides[%q]", k)
		switch {
		case !validFlowKey(k, true):
			return bad(field+".key", "must be at most %d visible ASCII characters", MaxFlowKeyBytes)
		case o.Weight < 0 || o.Weight > MaxFlowWeight:
			return bad(field+".weight", "must be 1..%d, not %d", MaxFlowWeight, o.Weight)
		case o.Concurrency < 0:
			return bad(field+".concurrency", "must not be negative")
		}
		if err := rate(field+".rateLimit", o.Rate); err != nil {
			return err
		}
	}
	return nil
}

// flowText is a queue's flow control as the scripts read it (flow_parse in
// flow_scripts.go): "1 rate_limit rate_period_us rate_burst max_concurrency
// key_concurrency key_rate_limit key_rate_period_us key_rate_burst W|F
// overrides digest", 0 for a limit not set; overrides is 0 (none), 1 (some,
// none with a rate) or 2 (some with a rate); the digest of the overrides
// makes a change of them a change of the text. "" for nil.
func flowText(f *FlowControl) string {
	if f == nil {
		return ""
	}
	fair, ov := "W", "0"
	if f.Fairness == FairnessFIFO {
		fair = "F"
	}
	if len(f.Overrides) > 0 {
		ov = "1"
	}
	for _, o := range f.Overrides {
		if o.Rate != nil {
			ov = "2"
		}
	}
	h := fnv.New64a()
	for _, k := range slices.Sorted(maps.Keys(f.Overrides)) {
		_, _ = fmt.Fprintf(h, "%s\x00%s\x00", k, overrideText(f.Overrides[k]))
	}
	return strings.Join([]string{"1", rateText(f.Rate), strconv.FormatInt(f.MaxConcurrency, 10),
		strconv.FormatInt(f.PerKey.Concurrency, 10), rateText(f.PerKey.Rate), fair, ov, strconv.FormatUint(h.Sum64(), 16)}, " ")
}

// rateText is "limit period_us burst" ("0 0 0" for nil).
func rateText(r *FlowRate) string {
	if r == nil {
		return "0 0 0"
	}
	return fmt.Sprintf("%d %d %d", r.Limit, r.Period.Microseconds(), max(r.Burst, 1))
}

// overrideText is a key's override as fc:o holds it: "weight cap limit
// period_us burst", 0 for a field not set.
func overrideText(o KeyOverride) string {
	return fmt.Sprintf("%d %d %s", o.Weight, o.Concurrency, rateText(o.Rate))
}

// parseFlow reads back flowText and fc:o's fields (QueueConfig).
func parseFlow(text string, overrides map[string]string) *FlowControl {
	f := strings.Fields(text)
	if len(f) < 11 || f[0] != "1" {
		return nil
	}
	n := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	rate := func(l, p, b string) *FlowRate {
		if n(l) == 0 {
			return nil
		}
		return &FlowRate{Limit: n(l), Period: time.Duration(n(p)) * time.Microsecond, Burst: n(b)}
	}
	fc := &FlowControl{Rate: rate(f[1], f[2], f[3]), MaxConcurrency: n(f[4]),
		PerKey: KeyLimits{Concurrency: n(f[5]), Rate: rate(f[6], f[7], f[8])}, Fairness: FairnessWeighted}
	if f[9] == "F" {
		fc.Fairness = FairnessFIFO
	}
	for k, v := range overrides {
		o := strings.Fields(v)
		if len(o) != 5 {
			continue
		}
		if fc.Overrides == nil {
			fc.Overrides = map[string]KeyOverride{}
		}
		fc.Overrides[k] = KeyOverride{Weight: n(o[0]), KeyLimits: KeyLimits{Concurrency: n(o[1]), Rate: rate(o[2], o[3], o[4])}}
	}
	return fc
}

// writeFlow writes q's flow control (flowConfigScript).
func (b *Broker) writeFlow(ctx context.Context, q QueueRef, f *FlowControl) error {
	k := keysFor(q)
	args := []any{k.prefix, flowText(f)}
	if f != nil {
		for _, key := range slices.Sorted(maps.Keys(f.Overrides)) {
			args = append(args, key, overrideText(f.Overrides[key]))
		}
	}
	keys := k.guarded(k.config(), k.flow(), k.flowOverrides(), k.flowMigrate(), k.flowWake())
	if err := flowConfigScript.Run(ctx, b.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("broker: write flow control of %s: %w", q, err)
	}
	return nil
}

// rateNow is the rate clock the flow scripts get: "" (the Redis server's
// TIME) unless a test set rateClock.
func (b *Broker) rateNow() string {
	if b.rateClock == nil {
		return ""
	}
	return strconv.FormatInt(b.rateClock.Now().UnixMicro(), 10)
}

// waitWake waits up to d for a wake token of q (fc:wake): a slot freed, a
// key became ready, or a worker that filled its slots left work behind. Each
// token wakes one waiting worker (the group hands an entry to one reader).
// A queue without the wake stream (its flow state just ended) sleeps d.
func (b *Broker) waitWake(ctx context.Context, q QueueRef, d time.Duration) error {
	d = max(d, time.Millisecond) // BLOCK 0 would wait forever
	err := b.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: flowWakeGroup, Consumer: flowWaiter,
		Streams: []string{keysFor(q).flowWake(), ">"}, Count: 1, Block: d, NoAck: true}).Err()
	switch {
	case err == nil, errors.Is(err, redis.Nil):
		return nil
	case redis.HasErrorPrefix(err, "NOGROUP"):
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	return fmt.Errorf("broker: wait for %s: %w", q, err)
}

// FlowKeys returns up to top keys of a flow-controlled queue, busiest first
// (held slots, then backlog); none for a queue without flow control. It
// looks at the keys with held slots, the parked keys and up to
// flowScanKeys keys with queued tasks per band.
func (b *Broker) FlowKeys(ctx context.Context, q QueueRef, top int) ([]KeyFlow, error) {
	k := keysFor(q)
	v, err := flowKeysScript.Run(ctx, b.rdb, k.guarded(k.flow()), k.prefix).Slice()
	if err != nil {
		return nil, fmt.Errorf("broker: flow keys of %s: %w", q, err)
	}
	out := make([]KeyFlow, 0, len(v))
	for _, x := range v {
		f := replyStrings(x)
		if len(f) != 7 {
			return nil, fmt.Errorf("broker: flow keys of %s: unexpected reply %v", q, x)
		}
		n := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
		k := KeyFlow{Key: f[0], Queued: n(f[1]), Held: n(f[2]), Concurrency: n(f[3]), Weight: n(f[4])}
		switch f[5] {
		case "c":
			k.Parked = LimitKeyConcurrency
		case "r":
			k.Parked = LimitKeyRate
			if us, err := strconv.ParseFloat(f[6], 64); err == nil {
				k.EligibleAt = time.UnixMicro(int64(us)).UTC()
			}
		}
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b KeyFlow) int {
		if a.Held != b.Held {
			return int(b.Held - a.Held)
		}
		if a.Queued != b.Queued {
			return int(b.Queued - a.Queued)
		}
		return strings.Compare(a.Key, b.Key)
	})
	if top > 0 && len(out) > top {
		out = out[:top]
	}
	return out, nil
}

// ReconcileFlowSlots checks a flow-controlled queue's concurrency slots
// against its tasks and repairs them: a slot whose task is not Running is
// given back (a parked key below its cap returns, and waiting workers wake),
// and the per-key counts are rebuilt from the slots. It returns how many
// slots it gave back. On a queue that never had flow control it does
// nothing.
func (b *Broker) ReconcileFlowSlots(ctx context.Context, q QueueRef) (released int, err error) {
	k := keysFor(q)
	v, err := flowReconcileScript.Run(ctx, b.rdb, k.guarded(k.flow()), k.prefix).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("broker: reconcile flow slots of %s: %w", q, err)
	}
	return int(v[0]), nil
}

// waitReason is TaskInfo.WaitReason of t, a Queued task in a key list
// (flowWaitScript).
func (b *Broker) waitReason(ctx context.Context, q QueueRef, t TaskInfo) (string, error) {
	k := keysFor(q)
	r, err := flowWaitScript.Run(ctx, b.rdb, k.guarded(k.paused()), k.prefix, t.ID, t.Priority, t.FlowKey, b.rateNow()).Text()
	if err != nil {
		return "", fmt.Errorf("broker: wait reason of %s: %w", t.ID, err)
	}
	return r, nil
}
