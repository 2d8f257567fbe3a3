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

// Package loopback chooses loopback ports for servers that a process starts
// and binds later: the local stack's processes and pods, and tests.
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
)

// FreePort returns a loopback port that was free a moment ago and that this
// process has not handed out before. It draws from outside the kernel's
// ephemeral range (net.ipv4.ip_local_port_range) when the range leaves room,
// so no outgoing connection can take the port before its server binds it:
// the stand-in kubelet of internal/devstack keeps a pod's ports for the pod's
// life, and a port taken by a client socket crash-looped a pod's app until
// the test gave up (CI, 2026-12-02).
func FreePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	lo, hi := pool()
	if lo == hi {
		p, err := bindable(0)
		if err != nil {
			return 0, fmt.Errorf("find a free loopback port: %w", err)
		}
		portsGiven[p] = true
		return p, nil
	}
	for range 200 {
		p := lo + rand.IntN(hi-lo)
		if portsGiven[p] {
			continue
		}
		if _, err := bindable(p); err == nil {
			portsGiven[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("find a free loopback port: none free in %d-%d", lo, hi-1)
}

// FreeAddr is FreePort as an address, 127.0.0.1:<port>.
func FreeAddr() (string, error) {
	p, err := FreePort()
	return "127.0.0.1:" + strconv.Itoa(p), err
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
	pool       = sync.OnceValues(portPool)
)

// bindable binds port p on 127.0.0.1 (0: one the kernel chooses), closes it
// again and returns the port.
func bindable(p int) (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portPool is the range [lo, hi) FreePort draws from: the ports from 10000 up
// to the ephemeral range, else those above it, else none (lo == hi), when
// FreePort lets the kernel choose.
func portPool() (lo, hi int) {
	const floor, ceil, room = 10000, 65536, 1000
	eLo, eHi := 32768, 60999 // Linux's default
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		_, _ = fmt.Sscan(string(b), &eLo, &eHi)
	}
	switch {
	case eLo-floor >= room:
		return floor, eLo
	case ceil-(eHi+1) >= room:
		return eHi + 1, ceil
	}
	return 0, 0
}
