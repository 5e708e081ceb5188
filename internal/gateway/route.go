package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/keygate/keygate/internal/verify"
)

// Route says which requests it covers (host, path prefix, methods) and what
// they need: nothing (anonymous), or a token from one of Issuers (any
// configured issuer when empty) carrying every scope in Scopes.
type Route struct {
	Host       string // exact host, case-insensitive, port and a trailing dot ignored; empty matches any
	PathPrefix string // decoded whole path segments: "/v1" covers "/v1" and "/v1/x", not "/v1x"
	Methods    []string
	Anonymous  bool
	Issuers    []string
	Scopes     []string
	Upstream   string // for the reverse proxy
	// CaseInsensitive matches PathPrefix ignoring case (Unicode simple
	// folding, as strings.EqualFold), for an upstream that does.
	CaseInsensitive bool
	// AllowPathParams, AllowEncodedSlashes and AllowDotsAfterEmpty let
	// through paths with ";" parameters, %2F and %5C, or a ".." after an
	// empty segment, which are otherwise refused (see PathOptions and
	// Router.Match).
	AllowPathParams     bool
	AllowEncodedSlashes bool
	AllowDotsAfterEmpty bool

	host, prefix string // Host and PathPrefix as matched, set by NewRouter
}

// Router finds the first route, in configuration order, that covers a
// request. With no routes configured every request is covered by an implicit
// route that asks for any valid token.
type Router struct {
	routes []Route
	// byMethod: some route names methods. Without one, no reading of a
	// method can reach another route, so none is read but the method's.
	byMethod bool
}

// ErrNoRoute is the error for a request that no route covers.
var ErrNoRoute = errors.New("no route covers the request")

// NewRouter checks and stores routes.
func NewRouter(routes []Route) (*Router, error) {
	for i, r := range routes {
		if err := CheckPathPrefix(r.PathPrefix); err != nil {
			return nil, fmt.Errorf("route %d: %w", i, err)
		}
		if r.Anonymous && (len(r.Issuers) > 0 || len(r.Scopes) > 0) {
			return nil, fmt.Errorf("route %d: an anonymous route cannot require issuers or scopes", i)
		}
	}
	rt := &Router{routes: slices.Clone(routes)}
	for i := range rt.routes {
		r := &rt.routes[i]
		r.host, r.prefix = hostOnly(r.Host), strings.TrimSuffix(r.PathPrefix, "/")
		r.Methods = slices.Clone(r.Methods)
		for j, m := range r.Methods {
			if err := CheckMethod(m); err != nil {
				return nil, fmt.Errorf("route %d: %w", i, err)
			}
			r.Methods[j], _ = upperToken(m)
		}
		rt.byMethod = rt.byMethod || len(r.Methods) > 0
	}
	return rt, nil
}

// implicitRoute covers every request when no routes are configured.
var implicitRoute = &Route{}

// Match returns the route covering a request to host with method and
// rawPath (as sent: percent-encoded, no query), or ErrNoRoute, or
// ErrAmbiguousPath for a path that upstreams read in different ways, or
// ErrInvalidMethod or ErrAmbiguousMethod for a method they read in
// different ways (see "Request methods"; h and query, the request's
// headers and raw query, may be nil and empty). It is forward-auth's: the
// proxy in front forwards the path as the client sent it, and the upstream
// reads it in its own way.
//
// The path is matched as Tomcat reads it: ";" parameters stripped from
// each segment, percent-decoded, empty segments dropped, dot segments
// resolved. That reading decides which route covers the request, and the
// route must allow what the path holds (PathOptions). The path must also
// reach that same route, or an anonymous one (which admits every request,
// so the decision taken is the stricter), under every other reading that
// can differ for it:
//
//   - parameters kept as part of their segment (nginx, Go, Node.js);
//   - encoded slashes as separators (nginx, Apache with AllowEncodedSlashes);
//   - trailing dots and spaces stripped from each segment (IIS, Windows);
//   - empty segments kept and dot segments resolved as RFC 3986 says
//     (Node.js's URL, Python's urljoin, Jetty);
//   - a leading "//host" taken for a host, the rest read as RFC 3986 says
//     (new URL(path, base) in Node.js, the WHATWG URL standard);
//   - nothing resolved (Express, Flask and gin route the path as sent);
//
// and every combination of these, with every reading of the method. So a
// route that opts in is never reached by a request that some upstream
// resolves elsewhere, and no route is decided on for a request that some
// upstream resolves to a stricter one.
func (rt *Router) Match(host, method, rawPath string, h http.Header, query string) (*Route, error) {
	r, _, _, _, err := rt.matchAs(host, method, rawPath, h, query, true)
	return r, err
}

// match is Match for the proxy, which forwards the path it decided on
// (canonical) and the method upper-cased: the path's dot and empty
// segments are gone, so only the readings of parameters, encoded slashes
// and trailing dots are checked, and the method as sent is not. It also
// returns the route's index (-1 for the implicit route), the parsed path
// and the method to forward.
func (rt *Router) match(host, method, rawPath string, h http.Header, query string) (*Route, int, parsedPath, string, error) {
	return rt.matchAs(host, method, rawPath, h, query, false)
}

// matchAs matches rawPath under the readings of an upstream that gets it as
// sent, or as canonical forwards it; it also returns the method upper-cased.
func (rt *Router) matchAs(host, method, rawPath string, h http.Header, query string, asSent bool) (*Route, int, parsedPath, string, error) {
	ms, err := readMethod(method)
	if err != nil {
		return nil, -1, parsedPath{}, "", err
	}
	p, err := parsePath(rawPath)
	if err != nil {
		return nil, -1, p, "", err
	}
	if len(rt.routes) == 0 {
		// Every path gets the same decision: nothing is gained by refusing
		// path parameters, encoded slashes or dots after empty segments
		// (the rest of what parsePath refuses still is).
		return implicitRoute, -1, p, ms.canonical, nil
	}
	host = hostOnly(host)
	canonical := p.read(reading{})
	if rt.byMethod && (p.raw == "" || rt.methodMatters(host, canonical)) {
		// The method's other readings (its case, overrides) may reach
		// another rule: read them.
		if err := ms.readOthers(method, h, query, asSent); err != nil {
			return nil, -1, p, "", err
		}
	}
	i := rt.find(host, ms.canonical, canonical)
	if p.raw == "" || ms.n > 0 {
		// A plain path (already canonical) read with one method has no
		// other reading.
		if err := rt.sameRoute(i, host, &ms, &p, asSent); err != nil {
			return nil, -1, p, "", err
		}
	}
	if i < 0 {
		return nil, -1, p, "", ErrNoRoute
	}
	r := &rt.routes[i]
	if !p.allowedBy(PathOptions{AllowPathParams: r.AllowPathParams, AllowEncodedSlashes: r.AllowEncodedSlashes,
		AllowDotsAfterEmpty: r.AllowDotsAfterEmpty}) {
		return nil, -1, p, "", ErrAmbiguousPath
	}
	return r, i, p, ms.canonical, nil
}

// sameRoute checks that every other reading of the request reaches route
// i, or an anonymous route: ErrAmbiguousPath when a reading of the path
// does not, ErrAmbiguousMethod when a reading of the method does not.
func (rt *Router) sameRoute(i int, host string, ms *methods, p *parsedPath, asSent bool) error {
	var forms [5]segmentForm
	n := 1 // tomcatForm
	if p.trailingDots {
		forms[n] = windowsForm
		n++
	}
	if asSent && p.dotOrEmpty {
		forms[n], forms[n+1] = rfcForm, rawForm
		n += 2
	}
	if asSent && p.netPath {
		forms[n] = netPathForm
		n++
	}
	same := func(m, path string) bool {
		j := rt.find(host, m, path)
		return j == i || j >= 0 && rt.routes[j].Anonymous
	}
	for k := -1; k < ms.n; k++ {
		m, fail := ms.canonical, ErrAmbiguousPath
		if k >= 0 {
			m, fail = ms.other[k], ErrAmbiguousMethod
			if !same(m, p.read(reading{})) {
				return fail
			}
		}
		for _, keep := range [2]bool{false, true} {
			for _, split := range [2]bool{false, true} {
				if keep && !p.params || split && !p.encSlash {
					continue
				}
				for _, form := range forms[:n] {
					rd := reading{keepParams: keep, splitSlashes: split, segments: form}
					if rd != (reading{}) && !same(m, p.read(rd)) {
						return fail
					}
				}
			}
		}
	}
	return nil
}

// methodMatters reports whether the route covering host and the decoded
// path p may depend on the method: whether a route naming methods covers
// them before the first that takes any method.
func (rt *Router) methodMatters(host, p string) bool {
	for i := range rt.routes {
		if r := &rt.routes[i]; r.coversTarget(host, p) {
			return len(r.Methods) > 0
		}
	}
	return false
}

// find returns the index of the first route covering host, method (upper
// case, or as sent for that reading) and the decoded path p, or -1.
func (rt *Router) find(host, method, p string) int {
	for i := range rt.routes {
		if r := &rt.routes[i]; r.allows(method) && r.coversTarget(host, p) {
			return i
		}
	}
	return -1
}

// covers reports whether the decoded path p is under the route's prefix,
// in whole segments.
func (r *Route) covers(p string) bool {
	prefix := r.prefix
	if prefix == "" {
		return true
	}
	if !r.CaseInsensitive {
		return p == prefix || strings.HasPrefix(p, prefix) && p[len(prefix)] == '/'
	}
	// Segment by segment: folded, a segment may change its length in bytes.
	for prefix != "" {
		if p == "" {
			return false
		}
		var want, got string
		want, prefix = nextSegment(prefix)
		got, p = nextSegment(p)
		if !strings.EqualFold(want, got) {
			return false
		}
	}
	return true
}

// nextSegment splits s ("/a/b") into its first segment ("a") and the rest
// ("/b").
func nextSegment(s string) (seg, rest string) {
	s = s[1:]
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
}

// hostOnly returns a Host header's or a route's host name without port,
// IPv6 brackets, or the trailing dot of a fully qualified name.
// (net.SplitHostPort would allocate an error for every host without a port.)
func hostOnly(h string) string {
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i > 0 {
			h = h[1:i]
		}
	} else if i := strings.IndexByte(h, ':'); i >= 0 && strings.LastIndexByte(h, ':') == i {
		h = h[:i]
	}
	return strings.TrimSuffix(h, ".")
}

// Admits checks a verified token against the route's issuers and scopes. It
// returns "" when admitted, or a reason and the status to answer with.
func (r *Route) Admits(res *verify.Result) (reason string, status int) {
	if len(r.Issuers) > 0 && !slices.Contains(r.Issuers, res.Issuer) {
		return "wrong_issuer", http.StatusUnauthorized
	}
	for _, s := range r.Scopes {
		if !hasScope(res.Scope, s) {
			return "insufficient_scope", http.StatusForbidden
		}
	}
	return "", 0
}

func hasScope(list, want string) bool {
	for list != "" {
		var s string
		s, list, _ = strings.Cut(list, " ")
		if s == want {
			return true
		}
	}
	return false
}
