package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestMergePatchRFC7396: the examples of RFC 7396's appendix A whose
// target and patch are objects (the engine's data always is).
func TestMergePatchRFC7396(t *testing.T) {
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		{`{"n":1.0e+2}`, `{"m":12345678901234567890}`, `{"m":12345678901234567890,"n":1.0e+2}`},
	} {
		got, err := applyPatch([]byte(tc.target), []byte(tc.patch))
		if err != nil || string(got) != tc.want {
			t.Errorf("patch %s with %s = %s, %v; want %s", tc.target, tc.patch, got, err, tc.want)
		}
	}
}

// FuzzParseObject: the parser of data and patches never panics, accepts
// only valid JSON objects, refuses with ErrInvalid or ErrTooLarge, and
// what it returns parses to itself.
func FuzzParseObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":[1,{"c":null}]}}`, `{"a":1,"a":2}`, `[1]`, `{"a":"\u00e9"}`,
		` {"a" : true } `, `{"a":1}{}`, `{"a":"x`, "{\"a\":\"\xff\"}", `{"a":{"b":1},"b":{"b":2}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := parseObject("data", raw)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v is neither ErrInvalid nor ErrTooLarge", err)
			}
			return
		}
		if !json.Valid(raw) || !json.Valid(out) || out[0] != '{' {
			t.Fatalf("accepted %q as %q", raw, out)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("accepted %q, which is not an object: %v", raw, err)
		}
		again, err := parseObject("data", out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("%q parses to %q, then to %q, %v", raw, out, again, err)
		}
	})
}

// FuzzMergePatch: merging never panics, gives a JSON object, is
// idempotent (RFC 7396: the same patch twice is the patch once), and
// leaves every member the patch names as the patch says.
func FuzzMergePatch(f *testing.F) {
	f.Add([]byte(`{"a":{"b":1},"c":[1]}`), []byte(`{"a":{"b":null,"d":2},"c":null,"e":{"f":null}}`))
	f.Add([]byte(`{}`), []byte(`{"a":[{"b":null}]}`))
	f.Add([]byte(`{"a":1}`), []byte(`{"a":{"b":{"c":1}}}`))
	f.Fuzz(func(t *testing.T, target, patch []byte) {
		tgt, err1 := parseObject("data", target)
		p, err2 := parseObject("patch", patch)
		if err1 != nil || err2 != nil {
			return
		}
		once, err := applyPatch(tgt, p)
		if err != nil {
			if errors.Is(err, ErrTooLarge) {
				return
			}
			t.Fatalf("patch %s with %s: %v", tgt, p, err)
		}
		if _, err := parseObject("result", once); err != nil {
			t.Fatalf("patch %s with %s gave %s: %v", tgt, p, once, err)
		}
		twice, err := applyPatch(once, p)
		if err != nil || !bytes.Equal(once, twice) {
			t.Fatalf("patch %s with %s: once %s, twice %s (%v)", tgt, p, once, twice, err)
		}
		res, _ := decodeObject(once)
		pm, _ := decodeObject(p)
		for k, v := range pm {
			got, ok := res[k]
			switch v := v.(type) {
			case nil:
				if ok {
					t.Fatalf("patch %s with %s: %q is still there", tgt, p, k)
				}
			case map[string]any:
				if _, isObj := got.(map[string]any); !ok || !isObj {
					t.Fatalf("patch %s with %s: %q is %v, want an object", tgt, p, k, got)
				}
			default:
				if !reflect.DeepEqual(got, v) {
					t.Fatalf("patch %s with %s: %q is %v, want %v", tgt, p, k, got, v)
				}
			}
		}
	})
}

// FuzzCompactObject: what the fast path of parseObject accepts, the slow
// one accepts too, as the same bytes; and the fast path accepts the
// plain objects a secret's data usually is.
func FuzzCompactObject(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : [ 1 , -2.5e+3 , true , false , null , "x\"y" , { } , [ ] ] } `, `{"a":1,"a":2}`,
		`{"a":{"b":1},"b":{"b":2}}`, `{"\u0061":1,"a":2}`, `{"a":"\ud800","b":"\u00e9\n"}`, `[1]`, `{"a":01}`, `{"a":-}`,
		`{"a":1.}`, `{"a":1e}`, `{"a":tru}`, `{"a":"x`, `{"a":1}{}`, `{"a" 1}`, `{,}`, `{"a":[1,]}`, `{"a":1,}`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k3":3}`,
		"{\"a\":\"\t\"}", `{"a":[[[[[[{"b":[]}]]]]]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !utf8.Valid(raw) {
			return
		}
		fast, ok := compactObject(raw)
		slow, err := parseObjectSlow("data", raw)
		if ok && (err != nil || !bytes.Equal(fast, slow)) {
			t.Fatalf("fast path accepts %q as %q; slow path: %q, %v", raw, fast, slow, err)
		}
		if !ok && err == nil && !bytes.Contains(raw, []byte("\\")) {
			t.Errorf("fast path refuses %q, which holds no escape; slow path accepts it as %q", raw, slow)
		}
	})
}

// TestParseObjectDepth: deep nesting is accepted as encoding/json accepts
// it, past the fast path's depth too, and refused past encoding/json's.
func TestParseObjectDepth(t *testing.T) {
	for _, tc := range []struct {
		depth int
		ok    bool
	}{{10, true}, {maxFastDepth + 10, true}, {9000, true}, {10001, false}} {
		raw := `{"a":` + strings.Repeat("[", tc.depth-1) + strings.Repeat("]", tc.depth-1) + `}`
		out, err := parseObject("data", []byte(raw))
		if (err == nil) != tc.ok || (err == nil && string(out) != raw) {
			t.Errorf("depth %d: %.20q..., %v; want ok %v", tc.depth, out, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("depth %d: %v, want ErrInvalid", tc.depth, err)
		}
	}
}
