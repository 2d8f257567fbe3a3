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
// Package sse parses Server-Sent Events streams (the HTML Living Standard's
// event stream format, section 9.2.6) with bounded lines, for pkg/client's
// events stream.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
)

// MaxLine bounds one line of a stream (dtq's lines are a few hundred
// bytes), MaxData the data of one event; more is ErrTooLong.
const (
	MaxLine = 64 << 10
	MaxData = 1 << 20
)

// ErrTooLong is the error of a stream with a line longer than MaxLine, or
// an event whose data is longer than MaxData.
var ErrTooLong = errors.New("events stream line longer than 64 KiB or event longer than 1 MiB")

// Block is one block of a Server-Sent Events stream, the lines up to a
// blank line: its last id field and its data fields joined with newlines,
// as the SSE specification (HTML Living Standard, 9.2.6) dispatches them.
type Block struct {
	ID      string
	HasID   bool
	Data    string
	HasData bool
}

// Reader parses a Server-Sent Events stream. Lines end with LF or CRLF;
// comments (":" lines, the server's keep-alives) and unknown fields are
// skipped; an id field holding NUL is ignored, per the specification.
type Reader struct {
	rd *bufio.Reader
}

// NewReader reads the stream r.
func NewReader(r io.Reader) *Reader {
	return &Reader{rd: bufio.NewReaderSize(r, MaxLine)}
}

// Next returns the next block that has an id or data field. The stream
// ending, even mid-block, is io.ErrUnexpectedEOF: an events stream does
// not end by itself.
func (p *Reader) Next() (Block, error) {
	var b Block
	var data strings.Builder
	for {
		line, err := p.rd.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return Block{}, ErrTooLong
		case errors.Is(err, io.EOF):
			return Block{}, io.ErrUnexpectedEOF
		case err != nil:
			return Block{}, err
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) == 0 {
			if b.HasID || b.HasData {
				b.Data = strings.TrimSuffix(data.String(), "\n")
				return b, nil
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				b.ID, b.HasID = string(value), true
			}
		case "data":
			if data.Len()+len(value) > MaxData {
				return Block{}, ErrTooLong
			}
			data.Write(value)
			data.WriteByte('\n')
			b.HasData = true
		}
	}
}
