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

package redistest

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// SendTwice is a go-redis hook (Client.AddHook) that sends every script call
// (EVALSHA, EVAL) twice and discards the first reply: what Redis runs when
// go-redis re-sends a call whose reply it did not read (a read timeout, a
// dropped connection). A pipeline holding a script call is sent twice whole,
// as go-redis re-sends one.
type SendTwice struct{}

func (SendTwice) DialHook(next redis.DialHook) redis.DialHook { return next }

func (SendTwice) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if scriptCall(cmd) {
			_ = next(ctx, redis.NewCmd(ctx, cmd.Args()...))
		}
		return next(ctx, cmd)
	}
}

func (SendTwice) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if scriptCall(c) {
				first := make([]redis.Cmder, len(cmds))
				for i, c := range cmds {
					first[i] = redis.NewCmd(ctx, c.Args()...)
				}
				_ = next(ctx, first)
				break
			}
		}
		return next(ctx, cmds)
	}
}

func scriptCall(cmd redis.Cmder) bool { return cmd.Name() == "evalsha" || cmd.Name() == "eval" }
