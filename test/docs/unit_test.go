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

package docs

import (
	"strings"
	"testing"
)

func TestCommandBlocks(t *testing.T) {
	md := "text\n\n<!-- not run: needs a registry -->\n```sh\npush x\n```\n\n```console\n$ kubectl get dt \\\n    -A\nNAME   AGE\necho   3s\n\n$ true\n```\n\n" +
		"```sh\ncat <<'EOF' | kubectl apply -f -\na: b\n\nEOF\n# comment\necho a \\\n  b\n```\n\n```yaml\nnot: run\n```\n"
	bs, err := commandBlocks("x.md", md)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 3 || bs[0].notRun != "needs a registry" || !bs[1].console || bs[2].console {
		t.Fatalf("blocks %+v", bs)
	}
	if c := bs[1].cmds; len(c) != 2 || c[0].text != "kubectl get dt \\\n    -A" || strings.Join(c[0].want, "|") != "NAME   AGE|echo   3s" || len(c[1].want) != 0 {
		t.Fatalf("console commands %+v", c)
	}
	if c := bs[2].cmds; len(c) != 2 || !strings.HasSuffix(c[0].text, "\nEOF") || c[1].text != "echo a \\\n  b" {
		t.Fatalf("sh commands %+v", c)
	}
	if _, err := commandBlocks("x.md", "<!-- not run: -->\n```sh\nx\n```\n"); err == nil {
		t.Error("a mark without a reason was taken")
	}
}

func TestVolatilityRule(t *testing.T) {
	for _, c := range []struct {
		want, got []string
		ok        bool
	}{
		{[]string{"echo-hello   default   Succeeded   1   31s"}, []string{"echo-hello default Succeeded 1 2m5s"}, true},
		{[]string{"echo-hello   default   Succeeded   1   31s"}, []string{"echo-hello default Failed 1 2m5s"}, false},
		{[]string{"sleep-3s  1"}, []string{"sleep-4s  1"}, false},
		{[]string{"task.dtq.dev/hi-x7k2p created"}, []string{"task.dtq.dev/hi-abcde created"}, true},
		{[]string{"869f1265-f985-4186-849a-f68db167b12f at 2026-12-01T20:00:00Z"}, []string{"3fa5bb26-b6dd-48ef-9169-63cc13e31310 at 2026-12-02T01:02:03.5+01:00"}, true},
		{[]string{"a", "...", "z"}, []string{"a", "b", "c", "z"}, true},
		{[]string{"a", "...", "z"}, []string{"a", "b"}, false},
		{[]string{"{\"ran\":true,\"value\":1}"}, []string{"{\"ran\":true,\"value\":2}"}, false},
		{nil, []string{"anything"}, true},
	} {
		if got := matches(c.want, c.got); got != c.ok {
			t.Errorf("matches(%q, %q) = %v", c.want, c.got, got)
		}
	}
}
