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
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ScriptHook is a go-redis hook on the script commands (EVALSHA, EVAL) a
// client sends, alone or in a pipeline; it counts those that succeed. Once
// After of them have succeeded, it runs Before once, before the next script
// command is sent, and runs Result on each script command that succeeds from
// then on: a non-nil error from Result becomes that command's error and the
// caller's. Before and Result are optional. ScriptHook is safe for concurrent
// use; Before and Result run under its lock.
//
// go-redis sets a lone command's error reply (a NOSCRIPT to EVALSHA, which it
// then retries with EVAL) on the command only after the hooks return, so the
// hook sets it first: such a command did not succeed.
type ScriptHook struct {
	After  int
	Before func()
	Result func(cmd redis.Cmder) error

	mu     sync.Mutex
	ok     int
	before bool // Before has run
}

func (h *ScriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *ScriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.send([]redis.Cmder{cmd})
		err := next(ctx, cmd)
		if err != nil {
			cmd.SetErr(err)
		}
		return h.done([]redis.Cmder{cmd}, err)
	}
}

func (h *ScriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.send(cmds)
		return h.done(cmds, next(ctx, cmds))
	}
}

func (h *ScriptHook) send(cmds []redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.Before != nil && !h.before && h.ok >= h.After && slices.ContainsFunc(cmds, isScript) {
		h.before = true
		h.Before()
	}
}

func (h *ScriptHook) done(cmds []redis.Cmder, err error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cmds {
		if !isScript(c) || c.Err() != nil {
			continue
		}
		if h.ok++; h.ok > h.After && h.Result != nil {
			if rerr := h.Result(c); rerr != nil {
				c.SetErr(rerr)
				if err == nil {
					err = rerr
				}
			}
		}
	}
	return err
}

func isScript(c redis.Cmder) bool { return c.Name() == "evalsha" || c.Name() == "eval" }
