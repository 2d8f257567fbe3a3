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

// Package console is dtq's web console: one HTML page, a hand-written script
// and a style sheet, embedded in the API binary and served under Path. The
// page holds no data: the script calls the API's JSON endpoints (and reads the
// events stream with fetch) with the user's bearer token, kept in the
// browser's sessionStorage, so the API's authentication and RBAC decide what
// the console shows and does. The assets themselves are public and load
// nothing from elsewhere (a Content-Security-Policy of 'self' enforces it),
// so the console works offline.
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

// Path is where the console is served.
const Path = "/ui/"

//go:embed static
var static embed.FS

// csp lets the page load and call only its own origin, run no inline script
// and be framed by nobody: a script injected through task data could not
// send the token elsewhere.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Handler serves the console's assets under Path (index.html at Path).
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic("console: " + err.Error()) // the embedded tree always has static/
	}
	files := http.StripPrefix(Path, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
