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

package worker

// The steps of IdempotentOperation one call each, on the same records and
// scripts, for a handler that is not Go code: the HTTP delivery sidecar
// serves them to the app container (docs/http-handlers.md), which claims a
// key, applies its side effect and records the result in separate requests.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Operation states of a claim.
const (
	OperationAcquired = "acquired" // the caller holds the key: run the side effect, then Finish or Release
	OperationDone     = "done"     // a result is stored: do not run it again
	OperationRunning  = "running"  // another holder runs it: ask again later
)

// OperationClaim is the answer of ClaimOperation.
type OperationClaim struct {
	State  string          `json:"state"`            // OperationAcquired, OperationDone or OperationRunning
	Token  string          `json:"token,omitempty"`  // acquired: the holder's token for Finish, Release and Renew
	Result json.RawMessage `json:"result,omitempty"` // done: the stored result
	// RetryAfterMs is, while running, how long the holder's lease has left.
	RetryAfterMs int64 `json:"retryAfterMs,omitempty"`
}

// ClaimOperation takes key for lease when nobody holds it (see
// IdempotentOperation for the rules), else says who does.
func ClaimOperation(ctx context.Context, rdb redis.UniversalClient, key string, lease time.Duration) (OperationClaim, error) {
	if key == "" {
		return OperationClaim{}, errors.New("worker: operation key is empty")
	}
	var tb [16]byte
	_, _ = rand.Read(tb[:])
	token := hex.EncodeToString(tb[:])
	var res []string
	err := retryConn(ctx, func(ctx context.Context) (err error) {
		res, err = opAcquire.Run(ctx, rdb, []string{key}, token, max(lease, 100*time.Millisecond).Milliseconds(), time.Now().UnixMilli()).StringSlice()
		return err
	})
	if err != nil {
		return OperationClaim{}, fmt.Errorf("operation %q: claim: %w", key, err)
	}
	switch res[0] {
	case OperationDone:
		return OperationClaim{State: OperationDone, Result: json.RawMessage(res[1])}, nil
	case OperationRunning:
		ms, _ := strconv.ParseInt(res[1], 10, 64)
		return OperationClaim{State: OperationRunning, RetryAfterMs: max(ms, 0)}, nil
	}
	return OperationClaim{State: OperationAcquired, Token: token}, nil
}

// RenewOperation extends the lease of a key the token holds; false when it
// no longer does.
func RenewOperation(ctx context.Context, rdb redis.UniversalClient, key, token string, lease time.Duration) (bool, error) {
	n, err := opRenew.Run(ctx, rdb, []string{key}, token, max(lease, 100*time.Millisecond).Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("operation %q: renew: %w", key, err)
	}
	return n == 1, nil
}

// FinishOperation stores result (JSON) at key for ttl and returns the
// result that counts: result, or the one another holder stored first.
func FinishOperation(ctx context.Context, rdb redis.UniversalClient, key, token string, result json.RawMessage, ttl time.Duration) (json.RawMessage, error) {
	if ttl <= 0 {
		return nil, errors.New("worker: operation ttl must be positive")
	}
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	if !json.Valid(result) {
		return nil, errors.New("worker: operation result is not valid JSON")
	}
	var res []string
	err := retryConn(ctx, func(ctx context.Context) (err error) {
		res, err = opFinish.Run(ctx, rdb, []string{key}, token, string(result), ttl.Milliseconds(), time.Now().UnixMilli()).StringSlice()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("operation %q: finish: %w", key, err)
	}
	if res[0] == OperationDone {
		return json.RawMessage(res[1]), nil
	}
	return result, nil
}

// ReleaseOperation gives up a key the token holds (the side effect failed),
// so the next claim runs it.
func ReleaseOperation(ctx context.Context, rdb redis.UniversalClient, key, token string) error {
	err := retryConn(ctx, func(ctx context.Context) error { return opRelease.Run(ctx, rdb, []string{key}, token).Err() })
	if err != nil {
		return fmt.Errorf("operation %q: release: %w", key, err)
	}
	return nil
}
