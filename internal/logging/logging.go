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

// Package logging adapts go-redis's logger to dtq's log format, whose
// logger is pkg/worker's NewLogger (JSON lines on stderr with the keys time,
// level, msg and snake_case attributes). The manager writes the same keys
// through controller-runtime's zap logger (cmd/manager). Task lines carry
// task_id, namespace, queue and attempt (docs/observability.md).
package logging

import (
	"context"
	"fmt"
	"log/slog"
)

// Printer adapts log to go-redis's logger (redis.SetLogger), so that its own
// messages (connection pool warnings) are JSON lines too, at warn.
func Printer(log *slog.Logger) interface {
	Printf(ctx context.Context, format string, v ...any)
} {
	return printer{log.With("logger", "go-redis")}
}

type printer struct{ log *slog.Logger }

func (p printer) Printf(ctx context.Context, format string, v ...any) {
	p.log.WarnContext(ctx, fmt.Sprintf(format, v...))
}
