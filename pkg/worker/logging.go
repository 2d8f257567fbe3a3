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

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// NewLogger returns dtq's logger writing to w at level: JSON lines with the
// keys time, level (lowercase: debug, info, warn, error), msg and the
// attributes, as every dtq component writes them (docs/observability.md).
// ConfigFromEnv's Logger is NewLogger(os.Stderr, <DTQ_LOG_LEVEL>).
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: lowerLevel}))
}

// loggerFromEnv returns NewLogger on stderr at the level of DTQ_LOG_LEVEL
// (default info).
func loggerFromEnv() (*slog.Logger, error) {
	var l slog.Level
	if v := os.Getenv(EnvLogLevel); v != "" {
		if err := l.UnmarshalText([]byte(v)); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvLogLevel, err)
		}
	}
	return NewLogger(os.Stderr, l), nil
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
