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

// Package apitest checks the HTTP API against its OpenAPI document with
// kin-openapi: the document itself, and every response a test receives (a
// client whose transport validates), so a handler that drifts from the
// document fails the test that called it.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/dtq-dev/dtq/internal/httpapi"
)

// Doc loads the API's OpenAPI document and validates it as OpenAPI 3.1.
func Doc() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(httpapi.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("load openapi.json: %w", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("openapi.json is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.json is invalid: %w", err)
	}
	return doc, nil
}

var (
	once      sync.Once
	validator *Validator
	loadErr   error
)

// Validator validates responses against the document.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
}

// NewValidator returns the (shared) validator of the document.
func NewValidator() (*Validator, error) {
	once.Do(func() {
		doc, err := Doc()
		if err != nil {
			loadErr = err
			return
		}
		r, err := gorillamux.NewRouter(doc)
		if err != nil {
			loadErr = fmt.Errorf("route openapi.json: %w", err)
			return
		}
		validator = &Validator{doc: doc, router: r}
	})
	return validator, loadErr
}

// Check validates one response to req whose body is body (nil for an
// event stream, whose body is not read): its status must be documented for
// the operation, its headers and JSON body must match. A response to a path
// no operation has must be a documented Error.
func (v *Validator) Check(req *http.Request, status int, header http.Header, body []byte) error {
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			return fmt.Errorf("%s %s: no documented operation, yet answered %d", req.Method, req.URL.Path, status)
		}
		var doc any
		if err := json.Unmarshal(body, &doc); err != nil {
			return fmt.Errorf("%s %s: %d body is not JSON: %w", req.Method, req.URL.Path, status, err)
		}
		if err := v.doc.Components.Schemas["Error"].Value.VisitJSON(doc); err != nil {
			return fmt.Errorf("%s %s: %d body is not an Error: %w", req.Method, req.URL.Path, status, err)
		}
		return nil
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	if body == nil {
		opts.ExcludeResponseBody = true
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                opts,
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s answered %d, not as documented: %w\nbody: %s", req.Method, req.URL.Path, status, err, trim(body))
	}
	return nil
}

func trim(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}

// Transport returns base (http.DefaultTransport when nil) wrapped so that
// every response is checked; a response that does not match the document
// fails t. Event streams are checked without reading their body.
func Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	v, err := NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			if err := v.Check(req, resp.StatusCode, resp.Header, nil); err != nil {
				t.Errorf("%v", err)
			}
			return resp, nil
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if err := v.Check(req, resp.StatusCode, resp.Header, body); err != nil {
			t.Errorf("%v", err)
		}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
