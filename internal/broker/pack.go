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
	"slices"
)

// The packed layout: one version byte (packVersion), then per field its
// length as 4 bytes big-endian and its bytes, so any field may hold any bytes
// (a task type or idempotency key with a separator in it included). The
// scripts read it with Redis's struct library in one C call,
// struct.unpack(">B" .. ("I4c0" x n), s), which returns the version first.
//
// A submit batch item is one packed script argument (submitItemFields); the
// script stores its fields as fields of their own in the task hash.
const packVersion = 1

// pack appends the packed encoding of fields to dst.
func pack(dst []byte, fields ...[]byte) []byte {
	n := 1
	for _, f := range fields {
		n += 4 + len(f)
	}
	dst = append(slices.Grow(dst, n), packVersion)
	for _, f := range fields {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(f)))
		dst = append(dst, f...)
	}
	return dst
}

// luaUnpack is the struct.unpack format of a packed value of n fields: the
// version, then the fields (and struct.unpack's next position after them).
func luaUnpack(n int) string {
	f := ">B"
	for range n {
		f += "I4c0"
	}
	return f
}
