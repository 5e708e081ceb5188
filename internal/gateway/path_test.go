package gateway

import (
	"errors"
	"strings"
	"testing"
)

var (
	strict  = PathOptions{}
	params  = PathOptions{AllowPathParams: true}
	slashes = PathOptions{AllowEncodedSlashes: true}
	both    = PathOptions{AllowPathParams: true, AllowEncodedSlashes: true}
)

const refusedPath = "<refused>"

// CanonicalPath checks raw, a request path as sent (percent-encoded, no
// query), and returns the path keygate decides on and forwards: dot
// segments resolved, empty segments dropped, a trailing slash kept, escapes
// of unreserved characters decoded and other escapes in upper case,
// characters that may not appear raw in a path encoded, and ";" parameters
// and encoded slashes kept where opts allow them. A path it returns is its
// own canonical form.
func CanonicalPath(raw string, opts PathOptions) (string, error) {
	p, err := parsePath(raw)
	if err != nil {
		return "", err
	}
	if !p.allowedBy(opts) {
		return "", ErrAmbiguousPath
	}
	return p.canonical(opts.AllowPathParams), nil
}

func TestCanonicalPath(t *testing.T) {
	cases := []struct {
		raw  string
		opts PathOptions
		want string // refusedPath for ErrAmbiguousPath
	}{
		// Plain paths are their own canonical form.
		{"", strict, "/"},
		{"/", strict, "/"},
		{"a/b", strict, "/a/b"},
		{"/a/b", strict, "/a/b"},
		{"/a/b/", strict, "/a/b/"},
		{"/a-b_c.d~e!$&'()*+,=:@", strict, "/a-b_c.d~e!$&'()*+,=:@"},
		{"/...", strict, "/..."},
		{"/.a/..b/c..", strict, "/.a/..b/c.."},
		// Empty and dot segments.
		{"//a///b//", strict, "/a/b/"},
		{"/a/./b/../c", strict, "/a/c"},
		{"/a/b/..", strict, "/a/"},
		{"/a/b/.", strict, "/a/b/"},
		{"/a/b/../", strict, "/a/"},
		{"/..", strict, "/"},
		{"/../a", strict, "/a"},
		{"/a/../..//../b", strict, "/b"},
		{"/.", strict, "/"},
		// Escapes: unreserved decoded, reserved kept encoded in upper case,
		// what may not appear raw encoded.
		{"/a/%41%7e%2d%5f", strict, "/a/A~-_"},
		{"/a/%2a%3d%3A", strict, "/a/%2A%3D%3A"},
		{"/caf%c3%a9", strict, "/caf%C3%A9"},
		{"/café", strict, "/caf%C3%A9"},
		{"/a b", strict, "/a%20b"},
		{`/a[b]"<>^{|}`, strict, "/a%5Bb%5D%22%3C%3E%5E%7B%7C%7D"},
		{"/a%23b", strict, "/a%23b"},
		{"/100%25", strict, "/100%25"},
		{"/a%25b", strict, "/a%25b"},
		{"/%3f", strict, "/%3F"},
		// ";" parameters: refused unless allowed, then stripped for dot
		// segments (Tomcat's reading) and kept on the other segments.
		{"/a;x/b", strict, refusedPath},
		{"/a/b;", strict, refusedPath},
		{"/a/..;/b", strict, refusedPath},
		{"/a;x/b", params, "/a;x/b"},
		{"/a/..;/b", params, "/b"},
		{"/a/..;x=1/b", params, "/b"},
		{"/a/.;x/b", params, "/a/b"},
		{"/a/;x/b", params, "/a/b"},
		{"/a/;x", params, "/a/"},
		{"/a/b;jsessionid=AB%2a%41", params, "/a/b;jsessionid=AB%2AA"},
		{"/a/b;x;y=1,2", params, "/a/b;x;y=1,2"},
		{"/a/b;", params, "/a/b;"},
		{"/a/b;x=/../c", params, "/a/c"},
		// Encoded slashes: refused unless allowed, then kept, but never
		// hiding a dot segment.
		{"/a%2Fb", strict, refusedPath},
		{"/a%5cb", params, refusedPath},
		{"/a%2Fb", slashes, "/a%2Fb"},
		{"/a%2fb", slashes, "/a%2Fb"},
		{"/a%5cb", slashes, "/a%5Cb"},
		{"/a/%2F/b", slashes, "/a/%2F/b"},
		{"/a%2F..%2Fb", slashes, refusedPath},
		{"/a%2F..", slashes, refusedPath},
		{"/..%2Fb", slashes, refusedPath},
		{"/a%5C.%5Cb", slashes, refusedPath},
		{"/a%2F..;x%2Fb", both, refusedPath},
		{"/a;x%2F..", both, refusedPath},
		{"/a%2Fb;x", both, "/a%2Fb;x"},
		{"/a%2Fb;x", params, refusedPath},
		// Always refused, whatever the options.
		{"/%2e", both, refusedPath},
		{"/%2E%2E/a", both, refusedPath},
		{"/a%2eb", both, refusedPath},
		{"/.%2e/a", both, refusedPath},
		{"/a%3bb", both, refusedPath},
		{"/a%3B", both, refusedPath},
		{"/a\x00b", both, refusedPath},
		{"/a%00", both, refusedPath},
		{"/a\nb", both, refusedPath},
		{"/a\tb", both, refusedPath},
		{"/a%0d%0a", both, refusedPath},
		{"/a%7f", both, refusedPath},
		{"/a\x7f", both, refusedPath},
		{`/a\b`, both, refusedPath},
		{"/a#b", both, refusedPath}, // a fragment to nginx, a character to Go
		{"/a#/../b", both, refusedPath},
		{"/#", both, refusedPath},
		{`\a`, both, refusedPath},
		{"/%zz", both, refusedPath},
		{"/%2", both, refusedPath},
		{"/%", both, refusedPath},
		{"/a%g0", both, refusedPath},
		{"/%c0%ae%c0%ae/a", both, refusedPath}, // overlong "."
		{"/%e0%80%ae", both, refusedPath},
		{"/%c0%af", both, refusedPath}, // overlong "/"
		{"/%ff", both, refusedPath},
		{"/\xff", both, refusedPath},
		{"/%ed%a0%80", both, refusedPath}, // surrogate
		{"/%252e%252e/a", both, refusedPath},
		{"/%252E", both, refusedPath},
		{"/%252f", both, refusedPath},
		{"/%255c", both, refusedPath},
		{"/%2500", both, refusedPath},
		{"/%253b", both, refusedPath},
		{"/%2525", both, refusedPath},
		{"/%25%32%65", both, refusedPath}, // "%2e" once decoded
		{"/%2541", both, "/%2541"},        // "%41": once more decoded, only "A"
	}
	for _, tc := range cases {
		got, err := CanonicalPath(tc.raw, tc.opts)
		if tc.want == refusedPath {
			if !errors.Is(err, ErrAmbiguousPath) {
				t.Errorf("CanonicalPath(%q, %+v) = %q, %v; want ErrAmbiguousPath", tc.raw, tc.opts, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CanonicalPath(%q, %+v) = %q, %v; want %q", tc.raw, tc.opts, got, err, tc.want)
		}
	}
}

// FuzzCanonicalPath: the canonicaliser never panics, an accepted path is
// its own canonical form, holds no dot segment under any reading, and is
// matched as the path it came from; and the router forwards only a path it
// would route to the same rule itself.
func FuzzCanonicalPath(f *testing.F) {
	for _, s := range []string{
		"/", "", "/public/..;/admin/x", "/ADMIN/x", "/public/%2e%2e/admin", "/public/%252e%252e/admin",
		"/public/..%2Fadmin", "/public/..%5cadmin", `/public\..\admin`, "/public/%00", "/public/%c0%ae%c0%ae/admin",
		"/a;x/b", "/a/.;/b", "/a/;x", "//a//b/", "/a/b/..", "/a%2Fb;x", "/a%2F..%2Fb", "/caf%c3%a9", "/a%3bb",
		"/files%2Fadmin", "/admin/..;/public/x", "/public;x/y", "/%25%32%65", "/a b", "/100%25", "/x/..%2F..%2Ffiles",
		"/admin//../public", "//evil/admin/x", "/admin./x", "/admin%20/x", "/public/../admin", "/a//./../b/...",
	} {
		f.Add(s)
	}
	rt, err := NewRouter(readingRoutes)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, o := range []PathOptions{strict, params, slashes, both} {
			out, err := CanonicalPath(raw, o)
			if err != nil {
				if !errors.Is(err, ErrAmbiguousPath) {
					t.Fatalf("CanonicalPath(%q): %v", raw, err)
				}
				continue
			}
			again, err := CanonicalPath(out, o)
			if err != nil || again != out {
				t.Fatalf("CanonicalPath(%q, %+v) = %q, not canonical: again %q, %v", raw, o, out, again, err)
			}
			checkNoDotSegments(t, out)
			p, _ := parsePath(raw)
			q, _ := parsePath(out)
			if a, b := p.read(reading{}), q.read(reading{}); a != b {
				t.Fatalf("%q is matched as %q, its canonical form %q as %q", raw, a, out, b)
			}
		}
		r, i, p, _, err := rt.match("h", "GET", raw, nil, "")
		if err != nil {
			return
		}
		out := p.canonical(r.AllowPathParams)
		r2, i2, _, _, err := rt.match("h", "GET", out, nil, "")
		if err != nil || r2 != r {
			t.Fatalf("%q goes to route %d, but its forwarded form %q to %d (%v)", raw, i, out, i2, err)
		}
	})
}

func checkNoDotSegments(t *testing.T, out string) {
	t.Helper()
	if !strings.HasPrefix(out, "/") || strings.Contains(out, "//") {
		t.Fatalf("%q: not a rooted path without empty segments", out)
	}
	for _, seg := range strings.Split(out[1:], "/") {
		for _, piece := range strings.FieldsFunc(unescape(seg), isSlash) {
			if name, _, _ := strings.Cut(piece, ";"); name == "." || name == ".." {
				t.Fatalf("%q holds a dot segment", out)
			}
		}
		if name, _, _ := strings.Cut(seg, ";"); name == "." || name == ".." {
			t.Fatalf("%q holds a dot segment", out)
		}
	}
}

// readingRoutes exercise which rule decides a path that readings disagree on.
var readingRoutes = []Route{
	{PathPrefix: "/public", Anonymous: true, AllowPathParams: true},
	{PathPrefix: "/files", Anonymous: true, AllowEncodedSlashes: true},
	{PathPrefix: "/admin", Scopes: []string{"admin"}, CaseInsensitive: true},
	{PathPrefix: "/both", AllowPathParams: true, AllowEncodedSlashes: true},
	{PathPrefix: "/"},
}

func TestRouterReadings(t *testing.T) {
	rt, err := NewRouter(readingRoutes)
	if err != nil {
		t.Fatal(err)
	}
	const ambiguous, none = -1, -2
	cases := []struct {
		path  string
		route int
		fwd   string // the path the proxy forwards
	}{
		{"/public/x;jsessionid=1", 0, "/public/x;jsessionid=1"},
		{"/public/a/..;/b;k=v", 0, "/public/b;k=v"},
		{"/public/a/.;/b", 0, "/public/a/b"},
		// Tomcat's reading reaches /admin, which does not opt in.
		{"/public/..;/admin/x", ambiguous, ""},
		// Tomcat's reading reaches /public, which opts in; as written
		// (nginx, Go) the path is under /admin.
		{"/admin/..;/public/x", ambiguous, ""},
		{"/x/..;/public/x", ambiguous, ""},
		// As written, "public;x" is no /public segment.
		{"/public;x/y", ambiguous, ""},
		{"/files/a%2Fb", 1, "/files/a%2Fb"},
		{"/files/a%5Cb/", 1, "/files/a%5Cb/"},
		// With the slash decoded (nginx), /files/a; passed through
		// (Tomcat, Go), one segment "files/a" under the catch-all.
		{"/files%2Fa", ambiguous, ""},
		{"/admin%2Fx", ambiguous, ""},
		{"/x/..%2F..%2Ffiles", ambiguous, ""},
		{"/other/a%2Fb", ambiguous, ""},
		{"/other/x;y", ambiguous, ""},
		{"/both/a%2Fb;x", 3, "/both/a%2Fb;x"},
		// Case: only where the rule says so, segment by segment.
		{"/ADMIN/x", 2, "/ADMIN/x"},
		{"/Admin", 2, "/Admin"},
		{"/aDmIn/", 2, "/aDmIn/"},
		{"/administrator", 4, "/administrator"},
		{"/PUBLIC/x", 4, "/PUBLIC/x"},
		{"/public/../ADMIN", 2, "/ADMIN"},
		{"/FILES/a%2Fb", ambiguous, ""},
	}
	for _, tc := range cases {
		r, got, p, _, err := rt.match("h", "GET", tc.path, nil, "")
		switch {
		case errors.Is(err, ErrAmbiguousPath):
			got = ambiguous
		case errors.Is(err, ErrNoRoute):
			got = none
		case err != nil:
			t.Fatalf("%s: %v", tc.path, err)
		}
		if got != tc.route {
			t.Errorf("%s: route %d, want %d", tc.path, got, tc.route)
			continue
		}
		if err == nil {
			if fwd := p.canonical(r.AllowPathParams); fwd != tc.fwd {
				t.Errorf("%s: forwards %q, want %q", tc.path, fwd, tc.fwd)
			}
		}
	}

	// No route at all, and the implicit route without rules, which lets
	// through parameters and encoded slashes but nothing else refused.
	rt, _ = NewRouter([]Route{{PathPrefix: "/only"}})
	if _, err := rt.Match("h", "GET", "/elsewhere;x", nil, ""); !errors.Is(err, ErrNoRoute) {
		t.Errorf("no route: %v", err)
	}
	rt, _ = NewRouter(nil)
	for _, path := range []string{"/a;x", "/a%2Fb", "/"} {
		if r, err := rt.Match("h", "GET", path, nil, ""); err != nil || r != implicitRoute {
			t.Errorf("no rules, %s: %v", path, err)
		}
	}
	if _, err := rt.Match("h", "GET", "/%2e%2e", nil, ""); !errors.Is(err, ErrAmbiguousPath) {
		t.Errorf("no rules, /%%2e%%2e: %v", err)
	}
}

// TestRouterCaseInsensitiveOrder: first match in order wins whatever the
// case option, so a case-sensitive anonymous rule before a case-insensitive
// scoped one takes only its exact spelling, and one that is itself
// case-insensitive takes every spelling.
func TestRouterCaseInsensitiveOrder(t *testing.T) {
	rt, err := NewRouter([]Route{
		{PathPrefix: "/pub", Anonymous: true},
		{PathPrefix: "/pub/admin", Scopes: []string{"admin"}, CaseInsensitive: true},
		{PathPrefix: "/open", Anonymous: true, CaseInsensitive: true},
		{PathPrefix: "/"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{
		"/pub/admin/x": 0, // listed first: an anonymous rule covers its whole prefix
		"/PUB/admin/x": 1,
		"/Pub/ADMIN":   1,
		"/PUB/x":       3,
		"/OPEN/x":      2,
		"/\u212Aey":    3, // KELVIN SIGN: folds to k, but no rule has /key
	} {
		_, got, _, _, err := rt.match("h", "GET", path, nil, "")
		if err != nil || got != want {
			t.Errorf("%s: route %d (%v), want %d", path, got, err, want)
		}
	}
}

func TestCheckPathPrefix(t *testing.T) {
	for _, ok := range []string{"", "/", "/v1", "/v1/", "/a/b", "/café", "/a=b"} {
		if err := CheckPathPrefix(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"v1", "//", "/a//b", "/a/./b", "/a/..", "/a;b", `/a\b`, "/a%2Fb", "/a\x00", "/\xff"} {
		if err := CheckPathPrefix(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
		if _, err := NewRouter([]Route{{PathPrefix: bad}}); err == nil {
			t.Errorf("NewRouter accepted %q", bad)
		}
	}
}

// TestMatchAllocs: a plain path, the common case, is matched without
// allocating, as before paths were canonicalised.
func TestMatchAllocs(t *testing.T) {
	rt, _ := NewRouter(readingRoutes)
	for _, path := range []string{"/admin/users/42", "/public/a/b/", "/ADMIN/x"} {
		for _, host := range []string{"api.example.com", "api.example.com:443", "[::1]:80"} {
			if n := testing.AllocsPerRun(100, func() { rt.Match(host, "GET", path, nil, "") }); n != 0 {
				t.Errorf("%s %s: %v allocations", host, path, n)
			}
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	rt, _ := NewRouter(readingRoutes)
	for _, bc := range []struct{ name, path string }{
		{"plain", "/admin/users/42"},
		{"escaped", "/files/caf%C3%A9/a%20b"},
		{"params", "/public/a/..;/b;jsessionid=1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rt.Match("api.example.com", "GET", bc.path, nil, "")
			}
		})
	}
}

// TestRouterSegmentReadings: empty and dot segments, a leading "//" and
// trailing dots and spaces are read in different ways by the servers and
// frameworks behind a proxy, and forward-auth cannot change the path they
// get. A path is decided by Tomcat's reading only when every other reading
// reaches the same rule or an anonymous one (which admits every request,
// so the decision taken is the stricter); and a ".." that RFC 3986 and
// Tomcat resolve to different paths, because an empty segment precedes it,
// is refused unless the deciding rule opts in. The proxy forwards the path
// it decided on, so only what that path still holds is read other ways.
func TestRouterSegmentReadings(t *testing.T) {
	const ambiguous, none = -1, -2
	// The security review's rules: an admin prefix and an anonymous rest.
	review := []Route{
		{PathPrefix: "/admin", Scopes: []string{"admin"}, CaseInsensitive: true},
		{PathPrefix: "/", Anonymous: true},
	}
	optIn := []Route{{PathPrefix: "/", Anonymous: true, AllowDotsAfterEmpty: true}}
	bothOptIn := []Route{
		{PathPrefix: "/admin", Scopes: []string{"admin"}, AllowDotsAfterEmpty: true},
		{PathPrefix: "/", Anonymous: true, AllowDotsAfterEmpty: true},
	}
	scoped := []Route{
		{PathPrefix: "/public", Anonymous: true},
		{PathPrefix: "/admin", Scopes: []string{"admin"}},
		{PathPrefix: "/"},
	}
	cases := []struct {
		routes []Route
		path   string
		auth   int // Match: forward-auth, the upstream gets the path as sent
		proxy  int // match: the proxy forwards the path it decided on
	}{
		// Tomcat, nginx and Go drop the empty segment, then resolve "..":
		// /users. Node.js's URL, Python's urljoin and Jetty keep it, and
		// ".." removes it: /admin/users.
		{review, "/admin//../users", ambiguous, ambiguous},
		{review, "/admin//x/../../users", ambiguous, ambiguous},
		{review, "/ADMIN//../users", ambiguous, ambiguous},
		{review, "/admin///../../users", ambiguous, ambiguous},
		{review, "/users//../admin", ambiguous, ambiguous},
		{review, "/a/../..//../admin", 0, 0}, // every reading: /admin
		{optIn, "/admin//../users", 0, 0},
		{bothOptIn, "/admin//../users", ambiguous, 1},
		// Not resolved at all (Express, Flask, gin route the path as
		// sent): under /admin.
		{review, "/admin/../users", ambiguous, 1},
		{review, "/admin/./../users", ambiguous, 1},
		{review, "/Admin/x/../../users", ambiguous, 1},
		{review, "/admin/x/..", 0, 0},
		{review, "/admin/../admin/x", 0, 0},
		{review, "/users/../admin", 0, 0}, // stricter: read as sent it is anonymous
		{review, "/users/./x", 1, 1},
		{review, "/./admin/x", 0, 0},
		// Empty segments kept: a rule's prefix no longer matches.
		{review, "/admin//users", 0, 0},
		{scoped, "/public//x", 0, 0},
		{scoped, "//public/x", ambiguous, 0}, // as sent, under the catch-all
		{scoped, "/public//../admin/x", ambiguous, ambiguous},
		// A leading "//" names a host to a URL parser given a base
		// (new URL(path, base) in Node.js): //evil/admin/x is /admin/x.
		{review, "//evil/admin/x", ambiguous, 1},
		{review, "///evil/admin/x", ambiguous, 1},
		{review, "//admin/x", 0, 0},
		{review, "//evil/users", 1, 1},
		// IIS and Windows file systems ignore trailing dots and spaces.
		{review, "/admin./users", ambiguous, ambiguous},
		{review, "/admin.../users", ambiguous, ambiguous},
		{review, "/admin%20/users", ambiguous, ambiguous},
		{review, "/ADMIN.%20./users", ambiguous, ambiguous},
		{review, "/users./x", 1, 1},
		{review, "/admin/users.", 0, 0},
		{review, "/...", 1, 1},
		// Already refused: encoded dots and slashes.
		{review, "/admin/%2e%2e/users", ambiguous, ambiguous},
		{review, "/admin%2F..%2Fusers", ambiguous, ambiguous},
		// No route: a reading that finds no rule is no weaker.
		{[]Route{{PathPrefix: "/admin", Scopes: []string{"admin"}}}, "/x//../admin", ambiguous, ambiguous},
		{[]Route{{PathPrefix: "/admin", Scopes: []string{"admin"}}}, "/admin/../x", ambiguous, none},
	}
	for _, tc := range cases {
		rt, err := NewRouter(tc.routes)
		if err != nil {
			t.Fatal(err)
		}
		result := func(r *Route, err error) int {
			switch {
			case errors.Is(err, ErrAmbiguousPath):
				return ambiguous
			case errors.Is(err, ErrNoRoute):
				return none
			case err != nil:
				t.Fatalf("%s: %v", tc.path, err)
			}
			for i := range rt.routes {
				if &rt.routes[i] == r {
					return i
				}
			}
			t.Fatalf("%s: route not in the router", tc.path)
			return 0
		}
		if got := result(rt.Match("h", "GET", tc.path, nil, "")); got != tc.auth {
			t.Errorf("forward-auth %s (rules %d): %d, want %d", tc.path, len(tc.routes), got, tc.auth)
		}
		r, _, _, _, err := rt.match("h", "GET", tc.path, nil, "")
		if got := result(r, err); got != tc.proxy {
			t.Errorf("proxy %s (rules %d): %d, want %d", tc.path, len(tc.routes), got, tc.proxy)
		}
	}
}
