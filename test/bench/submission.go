package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/internal/broker"
)

// Submission: idempotent submission with a unique key per task (asynq: TaskID),
// and rejection of duplicates of tasks still in flight (dtq: IDEMPOTENCY_IN_PROGRESS,
// asynq: ErrTaskIDConflict). Duplicate cases first submit every task once,
// untimed, then time the resubmissions.
func init() {
	register(Case{Group: "Submission", Name: "unique key", Dtq: dtqSubmit(false), Peer: asynqEnqueue(false)})
	register(Case{Group: "Submission", Name: "duplicate rejected", Dtq: dtqSubmit(true), Peer: asynqEnqueue(true)})
}

var benchQueue = broker.QueueRef{Namespace: "bench", Name: "q"}

func dtqSubmit(dup bool) func(context.Context, Params) (int, time.Duration, error) {
	return func(ctx context.Context, p Params) (int, time.Duration, error) {
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr})
		defer rdb.Close()
		b := broker.New(rdb)
		cfg := broker.DefaultQueueConfig()
		cfg.MaxDepth = int64(p.Tasks) * 2
		if err := b.EnsureQueue(ctx, benchQueue, cfg); err != nil {
			return 0, 0, err
		}
		submit := func(i int) error {
			_, err := b.Submit(ctx, benchQueue, broker.SubmitRequest{
				Type: "bench", Payload: p.Payload, Priority: 5, IdempotencyKey: fmt.Sprintf("key-%d", i)})
			return err
		}
		if dup {
			if _, err := parallel(p.Tasks, p.Producers, submit); err != nil {
				return 0, 0, err
			}
		}
		d, err := parallel(p.Tasks, p.Producers, func(i int) error {
			err := submit(i)
			if dup {
				if !errors.Is(err, broker.ErrIdempotencyInProgress) {
					return fmt.Errorf("duplicate %d: %v, want IDEMPOTENCY_IN_PROGRESS", i, err)
				}
				return nil
			}
			return err
		})
		return p.Tasks, d, err
	}
}

func asynqEnqueue(dup bool) func(context.Context, Params) (int, time.Duration, error) {
	return func(ctx context.Context, p Params) (int, time.Duration, error) {
		c := asynq.NewClient(asynq.RedisClientOpt{Addr: p.Addr})
		defer c.Close()
		enqueue := func(i int) error {
			_, err := c.EnqueueContext(ctx, asynq.NewTask("bench", p.Payload), asynq.TaskID(fmt.Sprintf("key-%d", i)), asynq.Queue("bench"))
			return err
		}
		if dup {
			if _, err := parallel(p.Tasks, p.Producers, enqueue); err != nil {
				return 0, 0, err
			}
		}
		d, err := parallel(p.Tasks, p.Producers, func(i int) error {
			err := enqueue(i)
			if dup {
				if !errors.Is(err, asynq.ErrTaskIDConflict) {
					return fmt.Errorf("duplicate %d: %v, want ErrTaskIDConflict", i, err)
				}
				return nil
			}
			return err
		})
		return p.Tasks, d, err
	}
}
