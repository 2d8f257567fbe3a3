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

package direct_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/client/direct"
)

// A trusted service submits straight to Redis; the answers are the API's.
// In a pod, build the Redis client with redisconn.FromEnv().Client().
func ExampleQueue_Submit() {
	ctx := context.Background()
	q := direct.New(rdb).Queue("shop", "emails")
	t, err := q.Submit(ctx, "send_receipt", map[string]int{"order": 7}, client.IdempotencyKey("receipt-7"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.Status, t.Duplicate)
	_, err = q.Submit(ctx, "send_receipt", map[string]int{"order": 7}, client.IdempotencyKey("receipt-7"))
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.StatusCode, e.Code, e.TaskID == t.TaskID)
	}
	// Output:
	// Queued false
	// 409 IDEMPOTENCY_IN_PROGRESS true
}
