package secrets

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestDecodeMetaFast: the metadata as pathMeta.marshal writes it takes
// the fast path and decodes as encoding/json decodes it; what it does
// not take (escapes, other characters, white space) encoding/json still
// decodes.
func TestDecodeMetaFast(t *testing.T) {
	cases := []struct {
		name string
		m    pathMeta
		fast bool
	}{
		{"empty", pathMeta{}, true},
		{"one version", pathMeta{Created: 1, Updated: 2, Current: 1, Versions: []versionMeta{{Version: 1, Created: 1}}}, true},
		{"every field", pathMeta{CASRequired: true, MaxVersions: 3, DeleteVersionAfter: 90 * time.Minute,
			Custom: map[string]string{"owner": "ops team", "k": "v"}, Created: 1764400000000000, Updated: -5, Current: 9,
			Versions: []versionMeta{{Version: 7, Created: 3, Deleted: 4}, {Version: 8, Created: 5, Destroyed: true}, {Version: 9, Created: 6}},
			Gen:      1<<62 + 12345}, true},
		{"custom metadata escaped", pathMeta{Custom: map[string]string{"a": `say "hi" <b>`}}, false},
		{"custom metadata past ASCII", pathMeta{Custom: map[string]string{"é": "ü"}}, false},
	}
	for _, tc := range cases {
		raw, err := tc.m.marshal()
		if err != nil {
			t.Fatal(err)
		}
		var want pathMeta
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		got, ok := decodeMeta(raw)
		if ok != tc.fast {
			t.Errorf("%s: fast path %v, want %v (%s)", tc.name, ok, tc.fast, raw)
		}
		if ok && !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: fast path decodes %s as %+v, encoding/json as %+v", tc.name, raw, *got, want)
		}
		if slow, err := unmarshalMeta(raw); err != nil || !reflect.DeepEqual(*slow, want) {
			t.Errorf("%s: unmarshalMeta(%s) = %+v, %v", tc.name, raw, slow, err)
		}
	}
}

// FuzzDecodeMeta: whatever the fast path accepts, encoding/json decodes
// to the same pathMeta.
func FuzzDecodeMeta(f *testing.F) {
	for _, s := range []string{`{}`, `{"created":1,"updated":2,"current":1,"versions":[{"v":1,"c":1}]}`,
		`{"cas_required":true,"max_versions":3,"delete_version_after":5400000000000,"custom_metadata":{"k":"v","owner":"ops"},"created":1,"updated":-5,"current":9,"versions":[{"v":7,"c":3,"d":4},{"v":8,"c":5,"x":true}]}`,
		`{"custom_metadata":{}}`, `{"versions":[]}`, `{"current":01}`, `{"current":1.5}`, `{"current":99999999999999999999}`,
		`{"current":1,"current":2}`, `{"Current":1}`, `{"versions":null}`, `{"custom_metadata":{"a":"b","a":"c"}}`,
		`{"versions":[{"v":1,"v":2}]}`, `{"cas_required":tru}`, `{"created":-0}`, `{"x":1}`, `{"created":1}x`, `{"gen":4611686018427400249}`, `{"gen":1,"gen":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := decodeMeta(raw)
		if !ok {
			return
		}
		var want pathMeta
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("fast path accepts %q, encoding/json refuses it: %v", raw, err)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("%q: fast path %+v, encoding/json %+v", raw, *got, want)
		}
	})
}
