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

package sse

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func readAll(t *testing.T, in string) ([]Block, error) {
	t.Helper()
	r := NewReader(strings.NewReader(in))
	var out []Block
	for {
		b, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, b)
	}
}

func TestReader(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want []Block
	}{
		"start position": {in: "id: 5-0\n\n", want: []Block{{ID: "5-0", HasID: true}}},
		"multi-line data joined with newlines": {in: "id: 1\ndata: a\ndata:b\ndata:  c\n\n",
			want: []Block{{ID: "1", HasID: true, Data: "a\nb\n c", HasData: true}}},
		"CRLF, comments and unknown fields": {in: ": keep-alive\r\n\r\nevent: x\r\nretry: 5\r\ndata: {}\r\n\r\n",
			want: []Block{{Data: "{}", HasData: true}}},
		"field without colon": {in: "data\n\n", want: []Block{{HasData: true}}},
		"id with NUL ignored": {in: "id: a\x00b\ndata: x\n\n", want: []Block{{Data: "x", HasData: true}}},
		"last id wins":        {in: "id: 1\nid: 2\n\n", want: []Block{{ID: "2", HasID: true}}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := readAll(t, tc.in)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("end of stream: %v, want io.ErrUnexpectedEOF", err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("blocks (-want +got):\n%s", d)
			}
		})
	}
}

func TestReaderBounds(t *testing.T) {
	long := "data: " + strings.Repeat("x", MaxLine) + "\n\n"
	if _, err := readAll(t, long); !errors.Is(err, ErrTooLong) {
		t.Errorf("a line over MaxLine: %v, want ErrTooLong", err)
	}
	line := "data: " + strings.Repeat("x", MaxLine/2) + "\n"
	many := strings.Repeat(line, 2*MaxData/MaxLine+1) + "\n"
	if _, err := readAll(t, many); !errors.Is(err, ErrTooLong) {
		t.Errorf("an event over MaxData: %v, want ErrTooLong", err)
	}
}

// FuzzReader: any input ends in an error without a panic, and an event
// written the way the specification says (one data line per line of its
// data) reads back as it was.
func FuzzReader(f *testing.F) {
	for _, s := range []string{"id: 1-0\n\n", "data: {\"a\":1}\n\n", ": c\r\n\r\n", "data\n", "id: 1\ndata: a\ndata: b\n\n"} {
		f.Add([]byte(s), "1-0:2", "line one\nline two")
	}
	f.Fuzz(func(t *testing.T, raw []byte, id, data string) {
		r := NewReader(strings.NewReader(string(raw)))
		for range len(raw) + 1 { // each block consumes at least one byte
			if _, err := r.Next(); err != nil {
				break
			}
		}
		if strings.ContainsAny(id, "\r\n\x00") || strings.ContainsRune(data, '\r') || len(id)+len(data) > MaxLine/2 {
			return
		}
		var sb strings.Builder
		sb.WriteString(": keep-alive\n\nid: " + id + "\n")
		for l := range strings.SplitSeq(data, "\n") {
			sb.WriteString("data: " + l + "\n")
		}
		sb.WriteString("\n")
		got, err := readAll(t, sb.String())
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%q: %v", sb.String(), err)
		}
		want := []Block{{ID: id, HasID: true, Data: data, HasData: true}}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("%q (-want +got):\n%s", sb.String(), d)
		}
	})
}
