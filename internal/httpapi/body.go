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
	"encoding/json"
	"reflect"
	"time"

	"github.com/dtq-dev/dtq/pkg/client"
)

// submitBody is client.SubmitRequest as the server decodes it: not_before
// decodes through bodyTime, so a malformed time names its field like every
// other wrong type (time.Time's own errors do not).
type submitBody struct {
	client.SubmitRequest
	NotBefore *bodyTime `json:"not_before,omitempty"`
}

func (b submitBody) request() client.SubmitRequest {
	r := b.SubmitRequest
	if b.NotBefore != nil {
		r.NotBefore = &b.NotBefore.Time
	}
	return r
}

type batchBody struct {
	Tasks []submitBody `json:"tasks"`
}

// bodyTime is an RFC 3339 time whose decode error is a *json.UnmarshalTypeError.
type bodyTime struct{ time.Time }

func (t *bodyTime) UnmarshalJSON(b []byte) error {
	if err := t.Time.UnmarshalJSON(b); err != nil {
		return &json.UnmarshalTypeError{Value: string(b), Type: reflect.TypeFor[time.Time]()}
	}
	return nil
}
