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
	"encoding/json"
	"errors"
	"slices"
	"strconv"
)

// appendCanonical appends the canonical JSON of the JSON value v to dst:
// object keys sorted (the last of duplicate keys kept), no white space,
// strings and numbers as encoding/json writes them after decoding v with
// UseNumber and replacing each number by its value (an integer that fits
// int64 in decimal, any other number as the shortest text of its float64).
// That is what json.Marshal gives for such a decoded v, byte for byte
// (TestCanonicalMatchesDecodeAndMarshal), in one pass over v that copies
// most of it as it is: a payload whose strings are printable ASCII and whose
// numbers are short integers allocates only the output and one slice per
// object.
func appendCanonical(dst, v []byte) ([]byte, error) {
	c := canonicalizer{in: v, out: dst}
	if err := c.value(); err != nil {
		return nil, err
	}
	if c.space(); c.i != len(c.in) {
		return nil, errNotJSON
	}
	return c.out, nil
}

var errNotJSON = errors.New("not valid JSON")

type canonicalizer struct {
	in  []byte
	i   int
	out []byte
	ms  []member // the members of the objects being read, innermost last
}

func (c *canonicalizer) space() {
	for c.i < len(c.in) && (c.in[c.i] == ' ' || c.in[c.i] == '\t' || c.in[c.i] == '\n' || c.in[c.i] == '\r') {
		c.i++
	}
}

func (c *canonicalizer) value() error {
	if c.space(); c.i >= len(c.in) {
		return errNotJSON
	}
	switch c.in[c.i] {
	case '{':
		return c.object()
	case '[':
		return c.array()
	case '"':
		_, err := c.str()
		return err
	case 't':
		return c.literal("true")
	case 'f':
		return c.literal("false")
	case 'n':
		return c.literal("null")
	}
	return c.number()
}

func (c *canonicalizer) literal(s string) error {
	if len(c.in)-c.i < len(s) || string(c.in[c.i:c.i+len(s)]) != s {
		return errNotJSON
	}
	c.i += len(s)
	c.out = append(c.out, s...)
	return nil
}

// member is one member of an object being canonicalized: its key (decoded)
// and where its canonical "key":value sits in the output.
type member struct {
	key      []byte
	from, to int
}

// object writes the members in the order read and, unless their keys were
// in order already, rewrites them sorted by key (the last of equal keys
// kept, as a decode into a map does).
func (c *canonicalizer) object() error {
	c.i++
	start, base := len(c.out), len(c.ms)
	c.out = append(c.out, '{')
	sorted := true
	for {
		if c.space(); c.i < len(c.in) && c.in[c.i] == '}' && len(c.ms) == base {
			c.i++
			break
		}
		if len(c.ms) > base {
			c.out = append(c.out, ',')
		}
		from := len(c.out)
		key, err := c.str()
		if err != nil {
			return err
		}
		if c.space(); c.i >= len(c.in) || c.in[c.i] != ':' {
			return errNotJSON
		}
		c.i++
		c.out = append(c.out, ':')
		if err := c.value(); err != nil {
			return err
		}
		if len(c.ms) > base && bytes.Compare(c.ms[len(c.ms)-1].key, key) >= 0 {
			sorted = false
		}
		c.ms = append(c.ms, member{key, from, len(c.out)}) // nested objects have given their members back
		if c.space(); c.i < len(c.in) && c.in[c.i] == ',' {
			c.i++
			continue
		}
		if c.i < len(c.in) && c.in[c.i] == '}' {
			c.i++
			break
		}
		return errNotJSON
	}
	ms := c.ms[base:]
	c.ms = c.ms[:base]
	if sorted {
		c.out = append(c.out, '}')
		return nil
	}
	written := slices.Clone(c.out[start:])
	slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	c.out = append(c.out[:start], '{')
	for j, m := range ms {
		if j+1 < len(ms) && bytes.Equal(ms[j+1].key, m.key) {
			continue // a later duplicate wins
		}
		if len(c.out) > start+1 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, written[m.from-start:m.to-start]...)
	}
	c.out = append(c.out, '}')
	return nil
}

func (c *canonicalizer) array() error {
	c.i++
	c.out = append(c.out, '[')
	if c.space(); c.i < len(c.in) && c.in[c.i] == ']' {
		c.i++
		c.out = append(c.out, ']')
		return nil
	}
	for {
		if err := c.value(); err != nil {
			return err
		}
		if c.space(); c.i < len(c.in) && c.in[c.i] == ',' {
			c.i++
			c.out = append(c.out, ',')
			continue
		}
		if c.i < len(c.in) && c.in[c.i] == ']' {
			c.i++
			c.out = append(c.out, ']')
			return nil
		}
		return errNotJSON
	}
}

// str writes the string at c.i as json.Marshal writes its value, and
// returns the value. A string of printable ASCII without an escape, or any
// of <, > and & (which json.Marshal escapes), is that text already.
func (c *canonicalizer) str() ([]byte, error) {
	if c.i >= len(c.in) || c.in[c.i] != '"' {
		return nil, errNotJSON
	}
	simple := true
	j := c.i + 1
	for ; j < len(c.in) && c.in[j] != '"'; j++ {
		switch b := c.in[j]; {
		case b == '\\':
			simple = false
			j++ // the escaped byte (an escaped quote does not end the string)
		case b < 0x20 || b >= 0x7f || b == '<' || b == '>' || b == '&':
			simple = false
		}
	}
	if j >= len(c.in) {
		return nil, errNotJSON
	}
	raw := c.in[c.i : j+1]
	c.i = j + 1
	if simple {
		c.out = append(c.out, raw...)
		return raw[1 : len(raw)-1], nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, errNotJSON
	}
	enc, _ := json.Marshal(s) // a string always encodes
	c.out = append(c.out, enc...)
	return []byte(s), nil
}

// number writes the number at c.i by value: an integer that fits int64 in
// decimal, another number as the shortest text of its float64, and one out
// of float64's range as it is (as a json.Number that neither parse accepts
// is written).
func (c *canonicalizer) number() error {
	j, plain := c.i, true
	for ; j < len(c.in); j++ {
		b := c.in[j]
		if b == '.' || b == 'e' || b == 'E' || b == '+' {
			plain = false
		} else if (b < '0' || b > '9') && b != '-' {
			break
		}
	}
	raw := c.in[c.i:j]
	if len(raw) == 0 {
		return errNotJSON
	}
	c.i = j
	digits := raw
	if raw[0] == '-' {
		digits = raw[1:]
	}
	if plain && len(digits) > 0 && len(digits) <= 18 && (digits[0] != '0' || len(raw) == 1) && !bytes.Contains(digits, []byte("-")) {
		c.out = append(c.out, raw...) // an int64 written as FormatInt writes it
		return nil
	}
	s := string(raw)
	if plain { // with a fraction or exponent ParseInt fails (and its error allocates): skip it
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			c.out = strconv.AppendInt(c.out, n, 10)
			return nil
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		c.out = strconv.AppendFloat(c.out, f, 'g', -1, 64)
	} else if json.Valid(raw) {
		c.out = append(c.out, raw...)
	} else {
		return errNotJSON
	}
	return nil
}
