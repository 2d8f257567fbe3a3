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

package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dtq-dev/dtq/pkg/kubeauth"
)

// --api-token and --api-token-file exclude each other; the hint for a user
// who is not a ServiceAccount names kubectl create token with the audience,
// and only that error gets it.
func TestAPICredentialsAndHint(t *testing.T) {
	c := &cli{api: apiFlags{token: "t", tokenFile: "f"}}
	if _, err := c.apiCredentials(); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("--api-token with --api-token-file: %v, want an error", err)
	}
	err := fmt.Errorf("queue stats: %w", kubeauth.ErrNotServiceAccount)
	if h := apiTokenHint(err); !strings.Contains(h, `--api-token "$(kubectl -n NAMESPACE create token SERVICEACCOUNT --audience dtq-api)"`) {
		t.Errorf("hint %q", h)
	}
	if h := apiTokenHint(errors.New("other")); h != "" {
		t.Errorf("hint %q for another error", h)
	}
}
