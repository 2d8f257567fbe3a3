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

package broker

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// The packed layout: one version byte (packVersion), then per field its
// length as 4 bytes big-endian and its bytes, so any field may hold any bytes
// (a task type or idempotency key with a separator in it included). The
// scripts read and write it with Redis's struct library in one C call
// (packFormat).
//
// A submit batch item is one packed script argument (submitItemFields); the
// script stores its fields as fields of their own in the task hash. A
// complete batch item is one too (completeItemFields), and a started task
// comes back packed (pack_task, taskFromPacked).
const packVersion = 1

// pack appends the packed encoding of fields to dst.
func pack(dst []byte, fields ...[]byte) []byte {
	n := 1
	for _, f := range fields {
		n += 4 + len(f)
	}
	dst = append(slices.Grow(dst, n), packVersion)
	for _, f := range fields {
		dst = appendField(dst, f)
	}
	return dst
}

// appendField appends one field of a packed value to dst.
func appendField[T string | []byte](dst []byte, f T) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(f)))
	return append(dst, f...)
}

// unpack splits s, packed with len(out) fields, into out: substrings of s, no
// copies. False when s is not such a packed value.
func unpack(s string, out []string) bool {
	if len(s) < 1 || s[0] != packVersion {
		return false
	}
	s = s[1:]
	for i := range out {
		if len(s) < 4 {
			return false
		}
		n := uint64(binary.BigEndian.Uint32([]byte(s[:4])))
		if uint64(len(s)-4) < n {
			return false
		}
		out[i], s = s[4:4+n], s[4+n:]
	}
	return s == ""
}

// luaPackTask is the Lua function pack_task(h): the task hash h (a table of
// its fields) packed, taskFields in order, absent fields "". A started task
// crosses to Go as one string this way (taskFromPacked): no field names, one
// reply string instead of two per field.
func luaPackTask() string {
	var locals, vals, args []string
	for i, f := range taskFields {
		v := fmt.Sprintf("v%d", i)
		locals = append(locals, v)
		vals = append(vals, fmt.Sprintf("h[%q] or \"\"", f))
		args = append(args, "#"+v, v)
	}
	return fmt.Sprintf("local function pack_task(h)\n  local %s =\n    %s\n  return struct.pack(%q, %d, %s)\nend\n",
		strings.Join(locals, ", "), strings.Join(vals, ", "), packFormat(len(taskFields)), packVersion, strings.Join(args, ", "))
}

// packFormat is the struct library's format of a packed value of n fields:
// struct.unpack returns the version, then the fields (and the next position
// after them); struct.pack takes the version, then each field's length and
// bytes.
func packFormat(n int) string { return ">B" + strings.Repeat("I4c0", n) }
