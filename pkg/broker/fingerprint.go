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
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
)

// A keyed submission carries a request fingerprint: what makes two
// submissions of one idempotency key the same request. It is the task type
// and the payload's canonical JSON, hashed here (SHA-256, its first 16 bytes
// in unpadded base64url: 22 characters) and stored by submitBatchScript in
// the task hash (field fp) of the task the key's record names. A later
// submission of the key is compared with it in the same script
// (docs/idempotency.md, "A key reused for a different request"). Priority,
// delay, expiry, attempts, timeout, metadata and the flow key do not count:
// they say how to run the work, not what it is, and a retrying client may
// recompute them (a delay relative to now, a request ID in the metadata).

// OnMismatch is what a queue does with a submission whose key has a record
// of a different request (its fingerprint differs).
type OnMismatch string

const (
	// MismatchReplay answers it as the seed does (replay or in progress),
	// saying that the request did not match: the default.
	MismatchReplay OnMismatch = "replay"
	// MismatchReject refuses it with CodeIdempotencyKeyMismatch; nothing is
	// written.
	MismatchReject OnMismatch = "reject"
)

// fingerprint returns the request fingerprint of a task type and a payload
// (a JSON object; empty is {}): the payload is compared by value, as its
// canonical JSON (appendCanonical). So the same object sent as bytes over
// HTTP and as a Task's spec.payload, which the API server stores re-encoded
// (keys sorted, 1.0 as 1), has one fingerprint.
func fingerprint(typ string, payload []byte) (string, error) {
	if len(bytes.TrimSpace(payload)) == 0 {
		payload = []byte("{}")
	}
	h := sha256.New()
	h.Write(binary.AppendUvarint(nil, uint64(len(typ)))) // the type's length first: no type+payload pair hashes like another
	h.Write([]byte(typ))
	canon, err := appendCanonical(make([]byte, 0, len(payload)), payload)
	if err != nil {
		return "", invalid("payload", "payload is not valid JSON")
	}
	h.Write(canon)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16]), nil
}
