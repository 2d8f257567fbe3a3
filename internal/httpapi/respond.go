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

package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/client/apiconv"
)

// RequestIDHeader is echoed when the client sends it (up to 128 printable
// ASCII characters), else generated, and is the request_id of error bodies.
const RequestIDHeader = "X-Request-ID"

type requestIDKey struct{}

// withRequestID sets the request ID on the response and in the context.
func withRequestID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set(RequestIDHeader, id)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range []byte(id) {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey{}).(string)
	return id
}

// buffers hold the bodies writeJSON encodes, for reuse.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// writeJSON writes v with status, then a newline.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := buffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 { // a large list's buffer is left to the GC
			buffers.Put(buf)
		}
	}()
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(v); err != nil { // the API's own types always marshal
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"code":"INTERNAL_ERROR","message":"encode response","details":{}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// writeError writes err as an error body {code, message, details,
// request_id}: an *client.Error as is, an engine error mapped by apiconv
// (CANCELED or TIMEOUT when the request's context is done). QUEUE_FULL also
// sets Retry-After. A 5xx is logged with err's own text (Redis's reply, an
// address), which the answer leaves out.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	err = apiconv.WithContext(r.Context(), err)
	e := *apiconv.Error(err)
	e.RequestID = requestID(r)
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(e.RetryAfter.Seconds())))
	}
	if e.StatusCode >= 500 {
		s.log.Error("Request failed", "method", r.Method, "path", r.URL.Path, "request_id", e.RequestID, "error", err)
	}
	writeJSON(w, e.StatusCode, &e)
}

// invalidRequest is a 400 INVALID_REQUEST about a query parameter or header.
func invalidRequest(name, format string, a ...any) *client.Error {
	return &client.Error{StatusCode: http.StatusBadRequest, Code: client.CodeInvalidRequest,
		Message: fmt.Sprintf(format, a...), Details: map[string]any{"field": name}}
}

// decodeBody decodes the JSON body into v, at most limit bytes (readBody):
// unknown fields, wrong types, trailing data and syntax errors are 400 with
// the field named (code INVALID_TASK for a task, else INVALID_REQUEST); a
// longer body is 413 PAYLOAD_TOO_LARGE, a late one 408 REQUEST_TIMEOUT.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, limit int64, code string, v any) error {
	body, err := s.readBody(w, r, limit)
	if err != nil {
		return bodyError(err, limit, code)
	}
	return decodeJSON(body, code, v)
}

// bodyError is the answer to a body that could not be read.
func bodyError(err error, limit int64, code string) error {
	var maxBytes *http.MaxBytesError
	var ce *client.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.As(err, &maxBytes):
		return tooLarge(limit)
	}
	return &client.Error{StatusCode: http.StatusBadRequest, Code: code, Message: "read body: " + err.Error()}
}

// tooLarge is the answer to a body over limit bytes.
func tooLarge(limit int64) error {
	return &client.Error{StatusCode: http.StatusRequestEntityTooLarge, Code: client.CodePayloadTooLarge,
		Message: fmt.Sprintf("request body is larger than %d bytes", limit), Details: map[string]any{"limit": limit}}
}

// decodeJSON decodes body into v (see decodeBody).
func decodeJSON(body []byte, code string, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	bad := func(field, format string, a ...any) error {
		e := &client.Error{StatusCode: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, a...)}
		if field != "" {
			e.Details = map[string]any{"field": field}
		}
		return e
	}
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typ):
			// The path names the embedded client.SubmitRequest of submitBody
			// (body.go); the JSON path leaves it out.
			field := strings.ReplaceAll(typ.Field, "SubmitRequest.", "")
			return bad(field, "field %s must be %s, not JSON %s", field, typeName(typ), typ.Value)
		case errors.As(err, &syn):
			return bad("", "body is not valid JSON (at byte %d): %v", syn.Offset, err)
		case errors.Is(err, io.EOF):
			return bad("", "body is empty; a JSON object is required")
		// encoding/json has no error type for an unknown field; its message
		// is stable.
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return bad(field, "unknown field %q", field)
		default:
			return bad("", "body: %v", err)
		}
	}
	if dec.More() {
		return bad("", "body has data after its JSON object")
	}
	return nil
}

// typeName names the Go type a JSON value should have had, in JSON terms.
func typeName(e *json.UnmarshalTypeError) string {
	if e.Type == reflect.TypeFor[time.Time]() {
		return "an RFC 3339 time string"
	}
	switch e.Type.Kind().String() {
	case "string":
		return "a string"
	case "int", "int64", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	case "slice":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	}
	return e.Type.String()
}
