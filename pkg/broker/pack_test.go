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
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// unpack reads back what pack wrote, any bytes included, and refuses what is
// not a packed value of the asked number of fields.
func TestUnpack(t *testing.T) {
	fields := []string{"", "a", "\x00\x00\x00\x05x", strings.Repeat("\xff", 70000), "\x01"}
	bs := make([][]byte, len(fields))
	for i, f := range fields {
		bs[i] = []byte(f)
	}
	s := string(pack(nil, bs...))
	got := make([]string, len(fields))
	if !unpack(s, got) || !slices.Equal(got, fields) {
		t.Fatalf("unpack(pack(%.20q)) = %.20q", fields, got)
	}
	for name, bad := range map[string]string{
		"empty":          "",
		"other version":  "\x02" + s[1:],
		"cut in a field": s[:len(s)-1],
		"cut in a size":  s[:3],
		"trailing bytes": s + "x",
	} {
		if unpack(bad, make([]string, len(fields))) {
			t.Errorf("%s: unpacked", name)
		}
	}
	if unpack(s, make([]string, len(fields)-1)) || unpack(s, make([]string, len(fields)+1)) {
		t.Error("unpacked with another number of fields")
	}
}

// A started task crosses from the scripts packed (pack_task): whatever bytes
// its type, key, metadata and payload hold, the start's reply is the task as
// stored, read by ReadStart and by Start.
func TestStartReplyIsTheStoredTask(t *testing.T) {
	e := newEnv(t)
	odd := "\x00\x01\x00\x00\x00\x04\xff:{}\"\n"
	sub := func() TaskInfo {
		return e.mustSubmit(SubmitRequest{Type: odd, IdempotencyKey: odd + time.Now().String(), Payload: raw(`{"s":"\u0000\u00ff"}`),
			Metadata: raw(`{"m":1}`), ExpiresAt: e.clock.Now().Add(time.Hour), MaxAttempts: 3, Priority: 7})
	}
	a, b := sub(), sub()
	ss, err := e.b.ReadStart(ctx, e.q, "w", "w", 1, 0)
	if err != nil || len(ss) != 1 || ss[0].Err != nil || !ss[0].Run {
		t.Fatalf("read-start: %+v %v", ss, err)
	}
	ds, err := e.b.Read(ctx, e.q, "w", 1, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("read: %v %v", ds, err)
	}
	_, started := e.start("w", ds[0])
	for _, got := range []TaskInfo{ss[0].Task, started} {
		stored := e.task(got.ID)
		if got.ID != a.ID && got.ID != b.ID || got.Type != odd || !reflect.DeepEqual(got, stored) {
			t.Fatalf("started %+v\nstored  %+v", got, stored)
		}
	}
}
