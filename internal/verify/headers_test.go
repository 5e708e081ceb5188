package verify

import (
	"context"
	"testing"

	"github.com/keygate/keygate/jose"
)

func TestHeaderMapping(t *testing.T) {
	s := ecSigner(t, 0, "k")
	mappings := []HeaderMapping{
		{"X-User", "sub"},
		{"x-roles", "realm_access.roles"},               // nested array; name canonicalised
		{"X-Client-Roles", "resource_access.api.roles"}, // two levels down
		{"X-Email", "email"},                            // missing
		{"X-Nested-Missing", "realm_access.nope"},       // missing inside an object
		{"X-Through-String", "sub.inner"},               // a path through a non-object
		{"X-Tenant", "https://example.com/tenant"},      // a claim name with dots
		{"X-Ns-Deep", "https://example.com/org.id"},     // dotted name, then a path
		{"X-Num", "n"},
		{"X-Float", "f"},
		{"X-Bool", "ok"},
		{"X-Null", "nothing"},
		{"X-Obj", "obj"},
		{"X-Mixed", "mixed"},
		{"X-Empty-Array", "none"},
		{"X-Escaped", "esc"},
		{"X-Inject", "inject"},
		{"X-Aud", "aud"},
	}
	c := claims{
		"iss": issA, "exp": t0.Unix() + 60, "sub": "alice", "aud": []string{"a", "b"},
		"realm_access":               map[string]any{"roles": []string{"admin", "user"}},
		"resource_access":            map[string]any{"api": map[string]any{"roles": []string{"read"}}},
		"https://example.com/tenant": "acme",
		"https://example.com/org":    map[string]any{"id": 42},
		"n":                          1234567890123,
		"f":                          1.5,
		"ok":                         true,
		"nothing":                    nil,
		"obj":                        map[string]any{"b": []int{1, 2}, "a": "x"},
		"mixed":                      []any{1, "two", map[string]any{"three": 3}, nil, false},
		"none":                       []string{},
		"esc":                        "caf\u00e9 \"q\"",
		"inject":                     "v\r\nX-Admin: true\x00",
	}
	want := []struct{ Name, Value string }{
		{"X-User", "alice"},
		{"X-Roles", "admin,user"},
		{"X-Client-Roles", "read"},
		{"X-Email", ""},
		{"X-Nested-Missing", ""},
		{"X-Through-String", ""},
		{"X-Tenant", "acme"},
		{"X-Ns-Deep", "42"},
		{"X-Num", "1234567890123"},
		{"X-Float", "1.5"},
		{"X-Bool", "true"},
		{"X-Null", ""},
		{"X-Obj", `{"a":"x","b":[1,2]}`},
		{"X-Mixed", `1,two,{"three":3},null,false`},
		{"X-Empty-Array", ""},
		{"X-Escaped", `café "q"`},
		{"X-Inject", "v  X-Admin: true "},
		{"X-Aud", "a,b"},
	}
	p := mustNew(t, Config{
		Policies: []Policy{{Issuer: issA, Keys: newSource(s.Key()), Algorithms: []jose.Alg{jose.ES256},
			Headers: mappings}},
		Now: newClock().Now,
	})
	res, err := p.Verify(context.Background(), mint(t, s, c))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Headers) != len(want) {
		t.Fatalf("%d headers, want %d", len(res.Headers), len(want))
	}
	for i, w := range want {
		if got := res.Headers[i]; got.Name != w.Name || got.Value != w.Value {
			t.Errorf("header %d: got %q: %q, want %q: %q", i, got.Name, got.Value, w.Name, w.Value)
		}
		if v := res.Headers[i].Values(); len(v) != 1 || v[0] != w.Value || cap(v) != 1 {
			t.Errorf("header %d: Values() %q (cap %d)", i, v, cap(v))
		}
	}
}

// TestRenderRaw covers JSON the token encoder above never writes: white
// space, escaped member names, nesting.
func TestRenderRaw(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{"string", `"abc"`, "abc"},
		{"escaped string", `"a\u0041\n"`, "aA\n"},
		{"spaced array", ` [ "a" , "b" ,3 ] `, "a,b,3"},
		{"nested array", `[["a"],["b","c"]]`, `["a"],["b","c"]`},
		{"spaced object", `{ "a" : [ 1 , 2 ] }`, `{"a":[1,2]}`},
		{"number", ` -1.5e3 `, "-1.5e3"},
		{"null", `null`, ""},
		{"empty array", `[ ]`, ""},
		{"truncated array", `["a",`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := render([]byte(tt.raw)); got != tt.want {
				t.Errorf("render(%s) = %q, want %q", tt.raw, got, tt.want)
			}
		})
	}
}

func TestMemberPath(t *testing.T) {
	obj := `{ "a\u002eb" : 1, "a" : { "b" : 2, "c.d": {"e": "deep"} }, "s": "x}\"{" , "z":[{"a":1}]}`
	tests := []struct {
		path string
		want string
		ok   bool
	}{
		{"a.b", "1", true}, // the escaped name "a.b" is matched whole first
		{"a.c.d.e", `"deep"`, true},
		{"s", `"x}\"{"`, true},
		{"z", `[{"a":1}]`, true},
		{"z.a", "", false}, // arrays are not traversed
		{"a.x", "", false},
		{"missing", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, ok := memberPath([]byte(obj), tt.path)
			if ok != tt.ok || string(got) != tt.want {
				t.Errorf("memberPath(%q) = %s, %v; want %s, %v", tt.path, got, ok, tt.want, tt.ok)
			}
		})
	}
	for _, bad := range []string{``, `[]`, `{`, `{"a"`, `{"a":}`, `{"a":1`, `{"a":1 "b":2}`, `{"a":"1}`} {
		if _, ok := member([]byte(bad), "b"); ok {
			t.Errorf("member(%q) found a value", bad)
		}
	}
}
