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
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/dtq-dev/dtq/pkg/client"
)

// list --via-api prints page by page what one TaskList document (json,
// yaml), one table (a header once) or the names would show.
func TestPagePrinter(t *testing.T) {
	var pages [][]client.Task
	var all []client.Task
	for p := range 3 {
		var page []client.Task
		for i := range 2 {
			tk := client.Task{TaskID: fmt.Sprintf("t%d%d", p, i), Queue: "q", TaskType: "echo", Status: client.StatusQueued}
			page = append(page, tk)
			all = append(all, tk)
		}
		pages = append(pages, page)
	}
	render := func(output string, pages ...[]client.Task) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		pp := &pagePrinter{c: &cli{streams: genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}}, output: output}
		for _, p := range pages {
			if err := pp.page(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := pp.end("No tasks."); err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String()
	}
	for _, output := range []string{"json", "yaml"} {
		for _, want := range [][]client.Task{all, nil} {
			got, _ := render(output, pages...)
			if want == nil {
				got, _ = render(output)
			}
			var l client.TaskList
			var err error
			if output == "json" {
				err = json.Unmarshal([]byte(got), &l)
			} else {
				err = yaml.Unmarshal([]byte(got), &l)
			}
			if err != nil {
				t.Fatalf("-o %s: %v\n%s", output, err, got)
			}
			if d := cmp.Diff(client.TaskList{Tasks: want, Count: len(want)}, l); d != "" && !(want == nil && len(l.Tasks) == 0 && l.Count == 0) {
				t.Errorf("-o %s (-want +got):\n%s", output, d)
			}
		}
	}
	if got, _ := render("name", pages...); got != "t00\nt01\nt10\nt11\nt20\nt21\n" {
		t.Errorf("-o name:\n%s", got)
	}
	table, _ := render("", pages...)
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 7 || !strings.HasPrefix(lines[0], "TASK ID") || strings.Count(table, "TASK ID") != 1 {
		t.Errorf("table: want one header and 6 rows:\n%s", table)
	}
	if out, errOut := render(""); out != "" || errOut != "No tasks.\n" {
		t.Errorf("an empty table: %q, %q", out, errOut)
	}
}
