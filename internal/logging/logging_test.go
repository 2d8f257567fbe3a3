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

package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/dtq-dev/dtq/pkg/worker"
)

func TestPrinter(t *testing.T) {
	var buf bytes.Buffer
	Printer(worker.NewLogger(&buf, slog.LevelInfo)).Printf(t.Context(), "pool: dial %s failed", "x:1")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["msg"] != "pool: dial x:1 failed" || line["level"] != "warn" || line["logger"] != "go-redis" {
		t.Fatalf("line %q (%v)", buf.String(), err)
	}
}
