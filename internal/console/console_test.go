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

package console

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// The console works offline: no asset names another origin (the SVG
// namespace, a name the browser never fetches, aside), and every file
// index.html loads is served.
func TestAssetsAreSelfContained(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}(/[^'"\s]*)?`)
	err := fs.WalkDir(static, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range external.FindAll(b, -1) {
			if string(m) != "http://www.w3.org/2000/svg" {
				t.Errorf("%s refers to another origin: %s", path, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	h := Handler()
	index := get(t, h, Path)
	refs := regexp.MustCompile(`(?:src|href)="([^"#:]+)"`).FindAllStringSubmatch(index, -1)
	if len(refs) < 2 {
		t.Fatalf("index.html loads %d local files, want the script and the style sheet", len(refs))
	}
	for _, ref := range refs {
		get(t, h, Path+ref[1])
	}
}

// A path outside the assets is 404, not index.html.
func TestUnknownAsset(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Path+"nope.js", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("%snope.js: %d, want 404", Path, rec.Code)
	}
}

func get(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusOK || len(body) == 0 {
		t.Fatalf("GET %s: %d with %d bytes", path, rec.Code, len(body))
	}
	if !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'self'") {
		t.Errorf("GET %s: no same-origin Content-Security-Policy", path)
	}
	return string(body)
}
