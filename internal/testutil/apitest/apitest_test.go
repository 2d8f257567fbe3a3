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

package apitest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The document loads and validates as OpenAPI 3.1 with kin-openapi.
func TestDocumentIsValidOpenAPI31(t *testing.T) {
	if _, err := Doc(); err != nil {
		t.Fatal(err)
	}
}

// The validator rejects what the document does not allow, so a drifting
// handler fails: an undocumented field, a missing required field, an
// undocumented status, a wrong type, and a 429 without Retry-After.
func TestValidatorRejectsDrift(t *testing.T) {
	v, err := NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	const taskPath = "/api/v1/namespaces/ns/queues/q/tasks/abc"
	task := `{"task_id":"abc","namespace":"ns","queue":"q","task_type":"echo","status":"Queued","priority":5,"attempt":1,` +
		`"max_attempts":5,"timeout_ms":30000,"created_at":"2026-01-01T00:00:00Z","available_at":"2026-01-01T00:00:00Z","execution":{},"duplicate":false}`
	get := httptest.NewRequest(http.MethodGet, taskPath, nil)
	if err := v.Check(get, 200, http.Header{"Content-Type": {"application/json"}}, []byte(task)); err != nil {
		t.Fatalf("a documented task fails: %v", err)
	}
	submit := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/ns/queues/q/tasks", nil)
	errBody := []byte(`{"code":"QUEUE_FULL","message":"full","details":{"retry_after_s":5}}`)
	for name, c := range map[string]struct {
		req    *http.Request
		status int
		header http.Header
		body   string
	}{
		"extra field":      {get, 200, http.Header{"Content-Type": {"application/json"}}, task[:len(task)-1] + `,"extra":1}`},
		"missing field":    {get, 200, http.Header{"Content-Type": {"application/json"}}, `{"task_id":"abc"}`},
		"wrong type":       {get, 200, http.Header{"Content-Type": {"application/json"}}, strings.Replace(task, `"priority":5`, `"priority":"5"`, 1)},
		"undocumented 201": {submit, 201, http.Header{"Content-Type": {"application/json"}}, task},
		"no Retry-After":   {submit, 429, http.Header{"Content-Type": {"application/json"}}, string(errBody)},
		"bad status value": {get, 200, http.Header{"Content-Type": {"application/json"}}, replaceStatus(task)},
		"unknown path 200": {httptest.NewRequest(http.MethodGet, "/nope", nil), 200, http.Header{"Content-Type": {"application/json"}}, `{}`},
	} {
		if err := v.Check(c.req, c.status, c.header, []byte(c.body)); err == nil {
			t.Errorf("%s: validated, want a failure", name)
		}
	}
}

func replaceStatus(task string) string {
	return strings.Replace(task, `"status":"Queued"`, `"status":"queued"`, 1)
}
