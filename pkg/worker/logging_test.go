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
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
)

func TestJSONLines(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, slog.LevelInfo)
	log.Debug("Hidden")
	log.Warn("Task attempt failed", "task_id", "t1", "attempt", 2)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	for k, want := range map[string]any{"level": "warn", "msg": "Task attempt failed", "task_id": "t1", "attempt": 2.0} {
		if line[k] != want {
			t.Errorf("%s = %v, want %v (line %s)", k, line[k], want, buf.String())
		}
	}
	if _, ok := line["time"]; !ok {
		t.Errorf("no time: %s", buf.String())
	}
}

func TestLoggerFromEnv(t *testing.T) {
	t.Setenv(EnvLogLevel, "debug")
	log, err := loggerFromEnv()
	if err != nil || !log.Enabled(t.Context(), slog.LevelDebug) {
		t.Fatalf("debug level: %v", err)
	}
	t.Setenv(EnvLogLevel, "")
	if log, err = loggerFromEnv(); err != nil || log.Enabled(t.Context(), slog.LevelDebug) || !log.Enabled(t.Context(), slog.LevelInfo) {
		t.Fatalf("default level is info: %v", err)
	}
	t.Setenv(EnvLogLevel, "loud")
	if _, err := loggerFromEnv(); err == nil {
		t.Fatal("an unknown level is accepted")
	}
}
