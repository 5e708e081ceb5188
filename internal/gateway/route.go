package gateway

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/keygate/keygate/internal/verify"
)

// Route says which requests it covers (host, path prefix, methods) and what
// they need: nothing (anonymous), or a token from one of Issuers (any
// configured issuer when empty) carrying every scope in Scopes.
type Route struct {
	Host       string // exact host, case-insensitive; empty matches any
	PathPrefix string // whole path segments: "/v1" covers "/v1" and "/v1/x", not "/v1x"
	Methods    []string
	Anonymous  bool
	Issuers    []string
	Scopes     []string
	Upstream   string // for the reverse proxy
}

// Router finds the first route, in configuration order, that covers a
// request. With no routes configured every request is covered by an implicit
// route that asks for any valid token.
type Router struct {
	routes []Route
}

// NewRouter checks and stores routes.
func NewRouter(routes []Route) (*Router, error) {
	for i, r := range routes {
		if r.PathPrefix != "" && !strings.HasPrefix(r.PathPrefix, "/") {
			return nil, fmt.Errorf("gateway: route %d: path prefix %q must start with /", i, r.PathPrefix)
		}
		if r.Anonymous && (len(r.Issuers) > 0 || len(r.Scopes) > 0) {
			return nil, fmt.Errorf("gateway: route %d: an anonymous route cannot require issuers or scopes", i)
		}
	}
	return &Router{routes: slices.Clone(routes)}, nil
}

var implicitRoute = &Route{}

// Match returns the route covering the request. The path is
// percent-decoded and cleaned first, so "/public/../admin" and
// "/public/%2e%2e/admin" are matched as "/admin".
func (rt *Router) Match(host, method, rawPath string) (*Route, bool) {
	p, ok := cleanPath(rawPath)
	if !ok {
		return nil, false
	}
	if len(rt.routes) == 0 {
		return implicitRoute, true
	}
	host = hostOnly(host)
	for i := range rt.routes {
		r := &rt.routes[i]
		if r.Host != "" && !strings.EqualFold(hostOnly(r.Host), host) {
			continue
		}
		if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
			continue
		}
		if !underPrefix(p, r.PathPrefix) {
			continue
		}
		return r, true
	}
	return nil, false
}

// index returns the position of r, which Match returned, in the routes.
func (rt *Router) index(r *Route) int {
	for i := range rt.routes {
		if &rt.routes[i] == r {
			return i
		}
	}
	return -1
}

func cleanPath(raw string) (string, bool) {
	if raw == "" {
		return "/", true
	}
	p, err := url.PathUnescape(raw)
	if err != nil || strings.IndexByte(p, 0) >= 0 {
		return "", false
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return path.Clean(p), true
}

func underPrefix(p, prefix string) bool {
	if prefix == "" || prefix == "/" {
		return true
	}
	prefix = strings.TrimSuffix(prefix, "/")
	return p == prefix || strings.HasPrefix(p, prefix) && p[len(prefix)] == '/'
}

func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return h
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
