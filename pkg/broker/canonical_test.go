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
	"strconv"
	"testing"
)

// decodeAndMarshal is the definition appendCanonical follows: v decoded with
// UseNumber, each number replaced by its value, encoded by json.Marshal
// (which sorts map keys).
func decodeAndMarshal(v []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errNotJSON
	}
	return json.Marshal(numbersByValue(x))
}

func numbersByValue(x any) any {
	switch v := x.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = numbersByValue(e)
		}
	case []any:
		for i, e := range v {
			v[i] = numbersByValue(e)
		}
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return json.Number(strconv.FormatInt(n, 10))
		}
		if f, err := v.Float64(); err == nil {
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
	}
	return x
}

var canonicalSeeds = []string{
	`{}`, `[]`, `{"a":1}`, ` { "b" : [ 1 , 2.50 , -0 , 0 ] , "a" : { } } `,
	`{"b":1,"a":2,"b":3}`, `{"a":{"x":1,"y":2},"a":{"z":3}}`,
	`{"n":[1.0,1e3,1E-3,-1.5e+300,123456789012345678,1234567890123456789,9223372036854775807,9223372036854775808,-9223372036854775808,1e400,-1e400,0.1,100000000000000000000000]}`,
	`{"s":"plain","e":"a\"b\\c\/d","u":"\u00e9\u20ac\ud83d\ude00","h":"<a&b>","c":"\u0001\b\f\n\r\t","l":"\u2028\u2029","d":"\u007f"}`,
	`{"\u0061":1,"a\u0000":2,"é":3,"e":4,"<":5}`,
	`{"utf8":"é€😀","bad":"` + "\xff\xfe" + `"}`,
	`[true,false,null,"x",{"k":[[],{}]}]`, `"top"`, `-12`, `0.5`,
}

// TestCanonicalMatchesDecodeAndMarshal: appendCanonical gives exactly
// decodeAndMarshal's bytes for every seed.
func TestCanonicalMatchesDecodeAndMarshal(t *testing.T) {
	for _, s := range canonicalSeeds {
		want, err := decodeAndMarshal([]byte(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		got, err := appendCanonical(nil, []byte(s))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s %v\nwant %s", s, got, err, want)
		}
	}
	for _, bad := range []string{`{`, `{"a"}`, `{"a":1,}`, `[1,]`, `"x`, `{"a":1}x`, `tru`, `{"a":-}`} {
		if got, err := appendCanonical(nil, []byte(bad)); err == nil {
			t.Errorf("%s: %s, want an error", bad, got)
		}
	}
}

// FuzzCanonical: on any input that is valid JSON, appendCanonical gives
// decodeAndMarshal's bytes (go -C pkg test -fuzz FuzzCanonical ./broker).
func FuzzCanonical(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if !json.Valid(v) {
			return
		}
		want, err := decodeAndMarshal(v)
		if err != nil {
			return // nesting beyond what the decoder accepts
		}
		got, err := appendCanonical(nil, v)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%q:\n got %s %v\nwant %s", v, got, err, want)
		}
	})
}
