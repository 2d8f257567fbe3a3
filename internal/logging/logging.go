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

// Package logging is dtq's log format for the binaries that log with slog (the
// workers and the HTTP API): JSON lines on stderr with the keys time, level
// (lowercase: debug, info, warn, error), msg and snake_case attributes. The
// manager writes the same keys through controller-runtime's zap logger
// (cmd/manager). Task lines carry task_id, namespace, queue and attempt
// (docs/observability.md).
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// EnvLevel is the level variable: debug, info (default), warn or error.
const EnvLevel = "DTQ_LOG_LEVEL"

// New returns a JSON logger writing to w at level.
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: lowerLevel}))
}

// FromEnv returns a JSON logger on stderr at the level of DTQ_LOG_LEVEL.
func FromEnv() (*slog.Logger, error) {
	var l slog.Level
	if v := os.Getenv(EnvLevel); v != "" {
		if err := l.UnmarshalText([]byte(v)); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvLevel, err)
		}
	}
	return New(os.Stderr, l), nil
}

// lowerLevel writes levels as the manager's zap logger does ("info", not "INFO").
func lowerLevel(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.LevelKey {
		if l, ok := a.Value.Any().(slog.Level); ok {
			a.Value = slog.StringValue(strings.ToLower(l.String()))
		}
	}
	return a
}

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
