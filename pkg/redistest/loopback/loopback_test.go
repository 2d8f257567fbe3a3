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

package loopback_test

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
)

// FreePort's ports are bindable, never handed out twice, and outside the
// kernel's ephemeral range, where an outgoing connection could take one
// before its server binds it.
func TestFreePortAvoidsEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Fatal(err)
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		t.Fatalf("ip_local_port_range %q: %v", b, err)
	}
	if lo < 11000 && hi > 64535 {
		t.Fatalf("the ephemeral range %d-%d leaves no room outside it on this machine; FreePort falls back to the kernel's choice", lo, hi)
	}
	seen := map[int]bool{}
	for range 200 {
		p, err := loopback.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p >= lo && p <= hi {
			t.Fatalf("port %d is in the ephemeral range %d-%d", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		_ = l.Close()
	}
}
