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

package devstack

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// Process is a process found by Leftovers.
type Process struct {
	PID     int
	Command string
}

// Leftovers lists the live processes that belong to the stack in dir: those
// whose command line names dir (kube-apiserver, etcd, redis-server) or whose
// environment carries the stack marker (manager, workers). After Stop it
// must be empty. It reads /proc, so it only works on Linux.
func Leftovers(dir string) ([]Process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	marker := []byte(markerEnv + "=" + dir)
	needle := []byte(dir + string(filepath.Separator))
	var found []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		base := filepath.Join("/proc", e.Name())
		cmdline, err := os.ReadFile(filepath.Join(base, "cmdline"))
		if err != nil || len(cmdline) == 0 { // gone, or a zombie / kernel thread
			continue
		}
		if stat, err := os.ReadFile(filepath.Join(base, "stat")); err == nil && isZombie(stat) {
			continue
		}
		environ, _ := os.ReadFile(filepath.Join(base, "environ"))
		if bytes.Contains(cmdline, needle) || containsEnv(environ, marker) {
			found = append(found, Process{PID: pid, Command: string(bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '}))})
		}
	}
	return found, nil
}

func containsEnv(environ, entry []byte) bool {
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if bytes.Equal(kv, entry) {
			return true
		}
	}
	return false
}

// isZombie reads the state letter of /proc/<pid>/stat ("pid (comm) S ...").
func isZombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
