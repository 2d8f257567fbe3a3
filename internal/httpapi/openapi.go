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
	_ "embed"
	"net/http"
	"strconv"

	"sigs.k8s.io/yaml"
)

//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPI is the API's OpenAPI 3.1 document as JSON, served at /openapi.json.
var OpenAPI = mustJSON(openAPIYAML)

func mustJSON(y []byte) []byte {
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		panic("httpapi: openapi.yaml: " + err.Error())
	}
	return j
}

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(OpenAPI)))
	_, _ = w.Write(OpenAPI)
}
