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
	"fmt"
	"regexp"
	"strings"
)

// block is one fenced command block of a Markdown file: ```sh (or bash,
// shell) holds commands, ```console holds "$ command" lines each followed by
// the output it shows.
type block struct {
	file    string
	line    int // of the opening fence
	console bool
	// notRun is the reason of a `<!-- not run: REASON -->` mark on the line
	// before the fence: the block is counted, not run.
	notRun string
	// stopAfter is set by `<!-- stopped after: REASON -->`: each command
	// runs for a few seconds and is then stopped (a stream that never
	// ends); what it printed until then is not compared.
	stopAfter string
	// outputVaries is set by `<!-- output varies: REASON -->` on a console
	// block: its commands run and must succeed, their output is not
	// compared.
	outputVaries string
	cmds         []command
}

// command is one command of a block and, in a console block, the output shown.
type command struct {
	line int
	text string
	want []string // console blocks: the lines shown after the command
}

var (
	fence  = regexp.MustCompile("^\\s*```\\s*([A-Za-z]*)")
	marker = regexp.MustCompile(`^\s*<!--\s*(not run|stopped after|output varies):\s*(.*?)\s*-->\s*$`)
	// heredoc is the start of a here-document (<<EOF, <<'EOF', <<-EOF);
	// here-strings (<<<) are not.
	heredoc = regexp.MustCompile(`(?:^|[^<])<<-?\s*['"]?([A-Za-z_]+)['"]?`)
)

// commandBlocks returns the command blocks of a Markdown file, in order.
func commandBlocks(file, text string) ([]block, error) {
	lines := strings.Split(text, "\n")
	var blocks []block
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		start := i
		indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " \t"))
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
			l := lines[i]
			if len(l) >= indent && strings.TrimSpace(l[:indent]) == "" {
				l = l[indent:]
			}
			body = append(body, l)
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: the fence is never closed", file, start+1)
		}
		lang := m[1]
		if lang != "sh" && lang != "bash" && lang != "shell" && lang != "console" {
			continue
		}
		b := block{file: file, line: start + 1, console: lang == "console"}
		for j := start - 1; j >= 0 && j >= start-3; j-- {
			mm := marker.FindStringSubmatch(lines[j])
			if mm == nil {
				if strings.TrimSpace(lines[j]) == "" {
					continue
				}
				break
			}
			if mm[2] == "" {
				return nil, fmt.Errorf("%s:%d: a %q mark needs a reason", file, j+1, mm[1])
			}
			switch mm[1] {
			case "not run":
				b.notRun = mm[2]
			case "stopped after":
				b.stopAfter = mm[2]
			case "output varies":
				b.outputVaries = mm[2]
			}
		}
		var err error
		if b.console {
			b.cmds, err = consoleCommands(body, start+2)
		} else {
			b.cmds, err = shellCommands(body, start+2)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// shellCommands splits a sh block into commands: a line, joined with the
// next while it ends in a backslash, or a here-document up to its end line.
// Blank and comment-only lines are dropped.
func shellCommands(body []string, first int) ([]command, error) {
	var cmds []command
	for i := 0; i < len(body); i++ {
		t := strings.TrimSpace(body[i])
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		c := command{line: first + i, text: body[i]}
		for strings.HasSuffix(body[i], "\\") && i+1 < len(body) {
			i++
			c.text += "\n" + body[i]
		}
		if m := heredoc.FindStringSubmatch(c.text); m != nil {
			for i++; ; i++ {
				if i == len(body) {
					return nil, fmt.Errorf("line %d: the here-document %s never ends", c.line, m[1])
				}
				c.text += "\n" + body[i]
				if strings.TrimSpace(body[i]) == m[1] {
					break
				}
			}
		}
		cmds = append(cmds, c)
	}
	return cmds, nil
}

// consoleCommands splits a console block into "$ command" lines (joined
// with the next while they end in a backslash) and the output lines after each.
func consoleCommands(body []string, first int) ([]command, error) {
	var cmds []command
	for i := 0; i < len(body); i++ {
		l := body[i]
		if strings.HasPrefix(l, "$ ") {
			c := command{line: first + i, text: strings.TrimPrefix(l, "$ ")}
			for strings.HasSuffix(body[i], "\\") && i+1 < len(body) {
				i++
				c.text += "\n" + strings.TrimPrefix(body[i], "> ")
			}
			cmds = append(cmds, c)
			continue
		}
		if len(cmds) == 0 {
			if strings.TrimSpace(l) == "" {
				continue
			}
			return nil, fmt.Errorf("line %d: a console block starts with its first \"$ \" command", first+i)
		}
		cmds[len(cmds)-1].want = append(cmds[len(cmds)-1].want, l)
	}
	for i := range cmds { // the blank line that separates commands is not output
		w := cmds[i].want
		for len(w) > 0 && strings.TrimSpace(w[len(w)-1]) == "" {
			w = w[:len(w)-1]
		}
		cmds[i].want = w
	}
	return cmds, nil
}

// The volatility rule: before output is compared, both the shown and the
// printed lines are normalised. Runs of blanks become one space (table
// columns widen with their content), and these volatile tokens become
// placeholders: UUIDs, RFC 3339 timestamps, event IDs (1796027753738-0:1),
// ages and durations standing alone between blanks (31s, 2m5s, 3h), the
// five-character random suffix of a generated name (hi-x7k2p) and loopback
// ports. A shown line that is just "..." matches any number of lines.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uuid>"},
	{regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`), "<time>"},
	{regexp.MustCompile(`\b\d{13}-\d+(:\d+)?\b`), "<event>"},
	{regexp.MustCompile(`(^| )(\d+[smhd])+( |$)`), "$1<age>$3"},
	{regexp.MustCompile(`\b([a-z][a-z0-9-]*-)[a-z0-9]{5}\b`), "$1<rand>"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:<port>"},
}

var blanks = regexp.MustCompile(`\s+`)

func normalise(line string) string {
	l := strings.TrimSpace(blanks.ReplaceAllString(line, " "))
	for _, v := range volatile {
		// twice: adjacent ages share the blank between them
		l = v.re.ReplaceAllString(v.re.ReplaceAllString(l, v.with), v.with)
	}
	return l
}

// matches reports whether the printed lines match the shown ones under the
// volatility rule.
func matches(want, got []string) bool {
	for len(got) > 0 && strings.TrimSpace(got[len(got)-1]) == "" {
		got = got[:len(got)-1]
	}
	if len(want) == 0 {
		return true // a command shown without output: only its exit status counts
	}
	return matchFrom(want, got)
}

func matchFrom(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for i := 0; i <= len(got); i++ {
			if matchFrom(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && normalise(want[0]) == normalise(got[0]) && matchFrom(want[1:], got[1:])
}
