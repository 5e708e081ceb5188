package verify

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzHeaderJSON checks the boundary-finding readers that render claim
// headers against encoding/json: on any input they return without
// panicking, and on a valid JSON object with distinct member names they
// find exactly the members encoding/json finds, with the same values, and
// split arrays into the same elements. (Tokens reach these readers only
// after jose has parsed the payload as strict JSON, so on invalid input
// only the absence of a panic is asserted.)
func FuzzHeaderJSON(f *testing.F) {
	for _, seed := range []struct{ obj, name string }{
		{`{"sub":"alice","aud":["a","b"]}`, "aud"},
		{`{ "a\u002eb" : 1, "a" : { "b" : 2, "c.d": {"e": "deep"} } }`, "a.c.d.e"},
		{`{"s": "x}\"{" , "z":[{"a":1}, [], null, -1.5e3]}`, "z"},
		{`{"esc":"caf\u00e9 \"q\"","inject":"v\r\nX: 1"}`, "inject"},
		{`{"a":{"b":{"c":[1,{"d":"]"}]}}}`, "a.b.c"},
		{`{"a":1 "b":2}`, "b"},
		{`{"a":"1}`, "a"},
		{`[1,2`, "a"},
	} {
		f.Add([]byte(seed.obj), seed.name)
	}
	f.Fuzz(func(t *testing.T, obj []byte, name string) {
		raw, found := member(obj, name)
		if found {
			_ = sanitize(render(raw))
		}
		if got, ok := memberPath(obj, name); ok {
			_ = sanitize(render(got))
		}
		_ = render(obj)
		elements(obj, func([]byte) {})

		want, distinct := topMembers(obj)
		if !distinct {
			return
		}
		w, ok := want[name]
		if ok != found {
			t.Fatalf("member(%s, %q) found=%v, encoding/json found=%v", obj, name, found, ok)
		}
		if !found {
			return
		}
		if !sameJSON(raw, w) {
			t.Fatalf("member(%s, %q) = %s, encoding/json has %s", obj, name, raw, w)
		}
		checkRender(t, raw)
	})
}

// checkRender compares render and elements with encoding/json on a valid
// value.
func checkRender(t *testing.T, raw []byte) {
	t.Helper()
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if got := render(raw); got != s {
			t.Fatalf("render(%s) = %q, encoding/json decodes %q", raw, got, s)
		}
		return
	}
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) != nil {
		return
	}
	var got [][]byte
	if !elements(raw, func(e []byte) { got = append(got, e) }) {
		t.Fatalf("elements(%s) failed on a valid array", raw)
	}
	if len(got) != len(arr) {
		t.Fatalf("elements(%s) gave %d elements, encoding/json %d", raw, len(got), len(arr))
	}
	for i := range arr {
		if !sameJSON(got[i], arr[i]) {
			t.Fatalf("elements(%s)[%d] = %s, encoding/json has %s", raw, i, got[i], arr[i])
		}
	}
}

// topMembers decodes a JSON object's members with encoding/json; distinct is
// false unless obj is what jose lets through: one valid object in UTF-8
// (encoding/json accepts invalid UTF-8 and replaces it) whose member names
// are all different (member returns the first of duplicates, encoding/json
// the last).
func topMembers(obj []byte) (members map[string]json.RawMessage, distinct bool) {
	if !utf8.Valid(obj) || !json.Valid(obj) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	members = map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key := tok.(string) // json.Valid held, and object keys are strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		if _, dup := members[key]; dup {
			return nil, false
		}
		members[key] = v
	}
	return members, true
}

func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}
