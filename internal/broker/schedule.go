package broker

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// PromoteDue moves up to limit due schedule members to their streams in one
// script: Pending keeps its attempt, Retrying gets attempt+1, expired ones end
// Expired (a Retrying one included, original defect 3), cancelled ones end
// Cancelled, missing ones are dropped. Safe to call concurrently.
// It returns how many were moved and the due time of the next member (zero if none).
func (b *Broker) PromoteDue(ctx context.Context, q QueueRef, limit int) (moved int, next time.Time, err error) {
	if limit <= 0 {
		limit = 100
	}
	k := keysFor(q)
	now, nowtxt := b.now()
	v, err := promoteScript.Run(ctx, b.rdb, []string{k.schedule()}, k.prefix, now, nowtxt, limit).Slice()
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("broker: promote due of %s: %w", q, err)
	}
	n, _ := v[0].(int64)
	if s := str(v[1]); s != "" {
		f, _ := strconv.ParseFloat(s, 64)
		next = time.UnixMilli(int64(f)).UTC()
	}
	return int(n), next, nil
}
