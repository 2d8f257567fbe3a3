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

package worker

import (
	"strings"

	"github.com/dtq-dev/dtq/pkg/broker"
)

// AppKeyPrefix is the prefix of the Redis keys a namespace's handlers may use
// for their own state: "dtq:app:<namespace>:". Under the operator's tenant
// isolation (docs/operations.md) the namespace's Redis user may touch these
// keys and its queues' keys, and nothing else.
func AppKeyPrefix(namespace string) string { return broker.AppKeyPrefix(namespace) }

// AppKey returns name under the key prefix of the task's namespace, e.g.
// t.AppKey("receipt:" + orderID) is "dtq:app:<namespace>:receipt:<orderID>".
// Use it for IdempotentOperation keys and any other state a handler keeps in
// the server's Redis. Hash tags in name ("{...}") still pick the cluster slot.
func (t *Task) AppKey(name string) string {
	ns, _, _ := strings.Cut(t.Queue, "/")
	return AppKeyPrefix(ns) + name
}
