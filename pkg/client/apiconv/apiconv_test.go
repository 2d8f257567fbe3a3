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

package apiconv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// replyErr is a Redis error reply, as go-redis returns it (a redis.Error).
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

var _ redis.Error = replyErr("")

// Error classifies what reaches it by what a client should do, keeps the
// cause for errors.Is, and puts no text of Redis in the message.
func TestErrorClassifies(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 6379}, Err: errors.New("connection refused")}
	for name, tc := range map[string]struct {
		err    error
		status int
		code   string
	}{
		"noperm":        {replyErr("NOPERM User api has no permissions to run the 'evalsha' command"), 500, client.CodeRedisError},
		"wrongtype":     {fmt.Errorf("broker: x: %w", replyErr("WRONGTYPE Operation against a key holding the wrong kind of value")), 500, client.CodeRedisError},
		"loading":       {replyErr("LOADING Redis is loading the dataset in memory"), 503, client.CodeRedisUnavailable},
		"readonly":      {replyErr("READONLY You can't write against a read only replica."), 503, client.CodeRedisUnavailable},
		"dial":          {dial, 503, client.CodeRedisUnavailable},
		"closed":        {redis.ErrClosed, 503, client.CodeRedisUnavailable},
		"canceled":      {fmt.Errorf("broker: %w", context.Canceled), StatusCanceled, client.CodeCanceled},
		"deadline":      {context.DeadlineExceeded, 504, client.CodeTimeout},
		"other":         {errors.New("boom at 10.0.0.7"), 500, client.CodeInternal},
		"not submitted": {&broker.Error{Code: broker.CodeNotSubmitted, Err: replyErr("NOPERM no")}, 500, client.CodeNotSubmitted},
	} {
		e := Error(tc.err)
		if e.StatusCode != tc.status || e.Code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", name, e.StatusCode, e.Code, tc.status, tc.code)
		}
		if !errors.Is(e, tc.err) {
			t.Errorf("%s: errors.Is(answer, cause) does not hold", name)
		}
		for _, raw := range []string{"NOPERM", "WRONGTYPE", "LOADING", "10.0.0.7", "boom"} {
			if strings.Contains(e.Message, raw) {
				t.Errorf("%s: message %q holds Redis's or the cause's text", name, e.Message)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if e := Error(WithContext(ctx, dial)); e.Code != client.CodeCanceled || !errors.Is(e, context.Canceled) || !errors.Is(e, dial) {
		t.Errorf("an i/o error of a cancelled call: %v, want CANCELED keeping both causes", e)
	}
}
