package gateway

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// methodRoutes are the shape: writes need a scope, the rest of
// /api is open, and /docs takes GET only.
var methodRoutes = []Route{
	{PathPrefix: "/api", Methods: []string{"POST", "PUT", "PATCH", "DELETE"}, Scopes: []string{"write"}},
	{PathPrefix: "/api", Anonymous: true},
	{PathPrefix: "/docs", Methods: []string{"GET"}, Scopes: []string{"read"}},
	{PathPrefix: "/docs", Scopes: []string{"admin"}},
}

func TestRouterMethods(t *testing.T) {
	rt, err := NewRouter(methodRoutes)
	if err != nil {
		t.Fatal(err)
	}
	const refused = -2
	cases := []struct {
		name    string
		method  string
		path    string
		query   string
		headers [][2]string
		want    int   // route index, or refused
		err     error // with refused
	}{
		{"DELETE", "DELETE", "/api/orders/7", "", nil, 0, nil},
		{"delete is DELETE", "delete", "/api/orders/7", "", nil, 0, nil},
		{"Delete is DELETE", "Delete", "/api/orders/7", "", nil, 0, nil},
		{"post is POST", "post", "/api/orders", "", nil, 0, nil},
		{"pAtCh is PATCH", "pAtCh", "/api/orders/7", "", nil, 0, nil},
		{"GET is open", "GET", "/api/orders/7", "", nil, 1, nil},
		{"get is open", "get", "/api/orders/7", "", nil, 1, nil},
		{"HEAD under a GET rule", "HEAD", "/docs/a", "", nil, 2, nil},
		{"head under a GET rule", "head", "/docs/a", "", nil, refused, ErrAmbiguousMethod},
		{"OPTIONS is not GET", "OPTIONS", "/docs/a", "", nil, 3, nil},
		{"custom method", "PURGE", "/api/x", "", nil, 1, nil},
		{"method with a space", "DELETE /api", "/api/x", "", nil, refused, ErrInvalidMethod},
		{"empty method", "", "/api/x", "", nil, refused, ErrInvalidMethod},
		{"method with NUL", "DEL\x00", "/api/x", "", nil, refused, ErrInvalidMethod},
		{"method with UTF-8", "DELETÉ", "/api/x", "", nil, refused, ErrInvalidMethod},
		{"lower case reaches another protected rule", "get", "/docs/a", "", nil, refused, ErrAmbiguousMethod},
		{"override: POST as DELETE, same rule", "POST", "/api/orders/7", "", [][2]string{{"X-Http-Method-Override", "DELETE"}}, 0, nil},
		// Yii2, Slim 4 and CakePHP take the header on any method.
		{"override: GET as DELETE", "GET", "/api/orders/7", "", [][2]string{{"X-Http-Method-Override", "DELETE"}}, refused, ErrAmbiguousMethod},
		{"override: HEAD as DELETE", "HEAD", "/api/orders/7", "", [][2]string{{"X-Method-Override", "delete"}}, refused, ErrAmbiguousMethod},
		{"override: GET as GET", "GET", "/api/orders/7", "", [][2]string{{"X-Http-Method-Override", "GET"}}, 1, nil},
		{"override: PUT as GET, an open rule", "PUT", "/api/orders/7", "", [][2]string{{"X-Http-Method-Override", "GET"}}, 0, nil},
		{"override: _method on a GET is not read", "GET", "/api/orders/7", "_method=DELETE", nil, 1, nil},
		// CGI-style servers (PHP's SAPIs, Rack's) read '_' as '-'.
		{"override: X_HTTP_Method_Override", "POST", "/docs/a", "", [][2]string{{"X_http_method_override", "GET"}}, refused, ErrAmbiguousMethod},
		{"override: X-Http-Method_Override", "POST", "/docs/a", "", [][2]string{{"X-Http-Method_override", "GET"}}, refused, ErrAmbiguousMethod},
		{"override: X_Method_Override", "POST", "/docs/a", "", [][2]string{{"X_method_override", "GET"}}, refused, ErrAmbiguousMethod},
		{"override: X_HTTP_Method", "POST", "/docs/a", "", [][2]string{{"x_http_method", "GET"}}, refused, ErrAmbiguousMethod},
		{"override: X-Http-Methods is another header", "POST", "/docs/a", "", [][2]string{{"X-Http-Methods", "GET"}}, 3, nil},
		// PHP drops leading spaces from a name and ends it at a NUL.
		{"override: +_method", "POST", "/docs/a", "+_method=GET", nil, refused, ErrAmbiguousMethod},
		{"override: %20%20_method", "POST", "/docs/a", "x=1&%20%20_method=GET", nil, refused, ErrAmbiguousMethod},
		{"override: +.method", "POST", "/docs/a", "+.method=GET", nil, refused, ErrAmbiguousMethod},
		{"override: _method%00", "POST", "/docs/a", "_method%00x=GET", nil, refused, ErrAmbiguousMethod},
		{"override: _method%00 and a bad escape", "POST", "/docs/a", "_method%00%zz=GET", nil, refused, ErrAmbiguousMethod},
		{"override: _method[ is _method_", "POST", "/docs/a", "_method[=GET", nil, 3, nil},
		{"override: a space inside is another name", "POST", "/docs/a", "_+method=GET", nil, 3, nil},
		{"override on a POST to /docs as GET", "POST", "/docs/a", "", [][2]string{{"X-Http-Method", "get"}}, refused, ErrAmbiguousMethod},
		{"override: X-Method-Override", "POST", "/docs/a", "", [][2]string{{"X-Method-Override", "GET"}}, refused, ErrAmbiguousMethod},
		{"override: a list, first differs", "POST", "/docs/a", "", [][2]string{{"X-Http-Method-Override", "GET, POST"}}, refused, ErrAmbiguousMethod},
		{"override: not a token", "POST", "/api/x", "", [][2]string{{"X-Http-Method-Override", "DEL ETE"}}, refused, ErrInvalidMethod},
		{"override: _method in the query", "POST", "/docs/a", "_method=GET", nil, refused, ErrAmbiguousMethod},
		{"override: _method encoded", "POST", "/docs/a", "%5Fmethod=get", nil, refused, ErrAmbiguousMethod},
		{"override: .method is PHP's _method", "POST", "/docs/a", "a=1&.method=GET", nil, refused, ErrAmbiguousMethod},
		{"override: after a semicolon", "POST", "/docs/a", "a=1;_method=GET", nil, refused, ErrAmbiguousMethod},
		{"override: another parameter", "POST", "/docs/a", "methods=GET&x_method=GET", nil, 3, nil},
		{"override: empty header", "POST", "/docs/a", "", [][2]string{{"X-Http-Method-Override", ""}}, 3, nil},
		{"override: _method same rule", "POST", "/api/a", "x=1&_method=delete", nil, 0, nil},
		{"override: bad escape", "POST", "/api/a", "_method=%zz", nil, refused, ErrAmbiguousMethod},
		{"override: bad escape elsewhere", "POST", "/api/a", "q=%zz", nil, 0, nil},
		{"override: too many", "POST", "/api/a", "", [][2]string{{"X-Http-Method-Override", "A,B,C,D,E"}}, refused, ErrAmbiguousMethod},
		{"override: lower case post on open path", "post", "/api/a", "", [][2]string{{"X-Http-Method-Override", "PUT"}}, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for _, kv := range tc.headers {
				h.Add(kv[0], kv[1])
			}
			r, i, _, _, err := rt.matchAs("h", tc.method, tc.path, h, tc.query, true)
			if tc.want == refused {
				if !errors.Is(err, tc.err) {
					t.Fatalf("route %d, err %v; want %v", i, err, tc.err)
				}
				return
			}
			if err != nil || i != tc.want || r != &rt.routes[i] {
				t.Fatalf("route %d, err %v; want route %d", i, err, tc.want)
			}
		})
	}
}

// TestProxyMatchMethod: the proxy forwards the method upper-cased, so the
// reading as sent does not count, and the method to forward is returned.
func TestProxyMatchMethod(t *testing.T) {
	rt, err := NewRouter(methodRoutes)
	if err != nil {
		t.Fatal(err)
	}
	_, i, _, m, err := rt.match("h", "get", "/docs/a", nil, "")
	if err != nil || i != 2 || m != "GET" {
		t.Fatalf("route %d, method %q, err %v; want route 2, GET", i, m, err)
	}
}

func TestRouterRuleMethods(t *testing.T) {
	rt, err := NewRouter([]Route{{PathPrefix: "/a", Methods: []string{"delete"}, Scopes: []string{"w"}}, {Anonymous: true}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := rt.Match("h", "DELETE", "/a", nil, ""); r == nil || r.Anonymous {
		t.Fatalf("a rule's lower case method does not cover DELETE")
	}
	for _, bad := range []string{"", "GET POST", "GÉT", "a/b"} {
		if _, err := NewRouter([]Route{{Methods: []string{bad}}}); err == nil {
			t.Errorf("rule method %q accepted", bad)
		}
	}
}

func TestReadMethodAllocs(t *testing.T) {
	h := http.Header{"Authorization": {"Bearer x"}}
	for _, m := range []string{"GET", "POST", "DELETE"} {
		if n := testing.AllocsPerRun(100, func() { readAll(m, h, "a=1") }); n != 0 {
			t.Errorf("%s: %v allocations, want 0", m, n)
		}
	}
}

// FuzzReadMethod: any method, override header and query is read without a
// panic; an accepted request's readings are tokens, the canonical one upper
// case, with no duplicate.
func FuzzReadMethod(f *testing.F) {
	f.Add("GET", "X-Http-Method-Override", "", "")
	f.Add("delete", "X-Http-Method-Override", "", "")
	f.Add("POST", "X-Http-Method-Override", "DELETE", "_method=get")
	f.Add("post", "x_http_method", "get, put", "_method=%zz")
	f.Add("GET", "X_Method-Override", "PATCH", "")
	f.Add("POST", "X-Other", "PATCH", "+_method=put&%20.method=get&_method%00%zz=x")
	f.Add("PO ST", "X-Http-Method-Override", "", "")
	f.Fuzz(func(t *testing.T, method, name, override, query string) {
		h := http.Header{name: {override}}
		m, err := readAll(method, h, query)
		if err != nil {
			if !errors.Is(err, ErrInvalidMethod) && !errors.Is(err, ErrAmbiguousMethod) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if m.canonical != strings.ToUpper(method) {
			t.Fatalf("canonical %q for %q", m.canonical, method)
		}
		seen := map[string]bool{m.canonical: true}
		for _, o := range m.other[:m.n] {
			if _, ok := upperToken(o); !ok || seen[o] {
				t.Fatalf("reading %q: not a token or repeated (%+v)", o, m)
			}
			seen[o] = true
		}
	})
}

// TestRouterWithoutMethodRules: with no rule naming methods, no reading of
// a method can reach another rule, so overrides and odd cases are not read
// (and cost nothing); an invalid method is still refused.
func TestRouterWithoutMethodRules(t *testing.T) {
	rt, err := NewRouter([]Route{{PathPrefix: "/admin", Scopes: []string{"admin"}}, {PathPrefix: "/", Anonymous: true}})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"X-Http-Method-Override": {"DELETE"}, "X_http_method": {"not a method"}}
	for _, m := range []string{"GET", "post", "DeLeTe"} {
		if r, err := rt.Match("h", m, "/admin/x", h, "_method=PUT"); err != nil || r != &rt.routes[0] {
			t.Errorf("%s: route %v, err %v; want the admin rule", m, r, err)
		}
	}
	if _, err := rt.Match("h", "GE T", "/admin/x", nil, ""); !errors.Is(err, ErrInvalidMethod) {
		t.Errorf("an invalid method: %v", err)
	}
}

// readAll reads every reading of a method, as for a rule that tells
// methods apart, of a request whose upstream gets it as sent.
func readAll(method string, h http.Header, query string) (methods, error) {
	m, err := readMethod(method)
	if err == nil {
		err = m.readOthers(method, h, query, true)
	}
	return m, err
}
