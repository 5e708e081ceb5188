package gateway

import (
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// Forwarding says which headers name the request a proxy in front is asking
// forward-auth about. A proxy sets some headers itself and passes the
// client's others through unchanged, so trusting a header the proxy does not
// set lets the client choose the path, method or host the rules are matched
// on. Each preset trusts exactly the headers its proxy overwrites:
//
//	nginx    X-Original-Method, X-Original-URI, X-Forwarded-Host (the set-up `keygate config nginx` prints)
//	traefik  X-Forwarded-Method, X-Forwarded-Uri, X-Forwarded-Host (set by ForwardAuth on every request)
//	caddy    X-Forwarded-Method, X-Forwarded-Uri, X-Forwarded-Host (set by forward_auth and reverse_proxy)
//	envoy    none: ext_authz's HTTP service sends the original method, host and
//	         path (after its path_prefix, /auth) as the check request's own
//
// Under a preset every trusted header must be present, once: a request
// without it (a proxy set up differently) or with two copies is refused, and
// every other forwarding header is ignored, and counted (a client forging
// one, or a proxy set up differently). The default, auto, reads both the
// X-Forwarded-* and X-Original-* families, refuses a request on which any two
// of them disagree or one is repeated, and falls back to the request itself
// when none is present. Whatever a proxy overwrites then wins or the request
// is refused, so a client's own copy can never steer the decision.
type Forwarding struct {
	Proxy             string   // the preset's name, or "custom"
	Method, URI, Host []string // trusted headers, canonical; empty: the request's own
	Required          bool     // a trusted header missing is refused, not replaced by the request's own
	MountPrefix       string   // envoy: stripped from the request's own path
}

// Proxy presets.
const (
	ProxyAuto    = "auto"
	ProxyNginx   = "nginx"
	ProxyTraefik = "traefik"
	ProxyCaddy   = "caddy"
	ProxyEnvoy   = "envoy"
	ProxyCustom  = "custom"
)

// Proxies lists the preset names, the default first.
var Proxies = []string{ProxyAuto, ProxyNginx, ProxyTraefik, ProxyCaddy, ProxyEnvoy}

// AuthPath is where forward-auth is served; Envoy's HTTP service mode sends
// its check requests under it (path_prefix: /auth).
const AuthPath = "/auth"

// Preset returns the forwarding of a named proxy; "" is auto.
func Preset(name string) (Forwarding, error) {
	switch name {
	case "", ProxyAuto:
		return Forwarding{Proxy: ProxyAuto, Method: []string{"X-Forwarded-Method", "X-Original-Method"},
			URI: []string{"X-Forwarded-Uri", "X-Original-Uri"}, Host: []string{"X-Forwarded-Host"}}, nil
	case ProxyNginx:
		return CustomForwarding(ProxyNginx, "X-Original-Method", "X-Original-URI", "X-Forwarded-Host"), nil
	case ProxyTraefik, ProxyCaddy:
		return CustomForwarding(name, "X-Forwarded-Method", "X-Forwarded-Uri", "X-Forwarded-Host"), nil
	case ProxyEnvoy:
		return Forwarding{Proxy: ProxyEnvoy, MountPrefix: AuthPath}, nil
	}
	return Forwarding{}, fmt.Errorf("unknown proxy %q (want one of %s)", name, strings.Join(Proxies, ", "))
}

// CustomForwarding trusts one named header for each of method, URI and host
// ("" takes that part from the request itself), each required.
func CustomForwarding(name, method, uri, host string) Forwarding {
	one := func(h string) []string {
		if h == "" {
			return nil
		}
		return []string{textproto.CanonicalMIMEHeaderKey(h)}
	}
	return Forwarding{Proxy: name, Method: one(method), URI: one(uri), Host: one(host), Required: true}
}

// Headers lists every header f trusts, for logs and documentation.
func (f Forwarding) Headers() []string {
	return slices.Concat(f.Method, f.URI, f.Host)
}

// Forwarded-header problems, each a reason counted in the decisions metric.
const (
	ReasonForwardedRepeated = "forwarded_header_repeated"
	ReasonForwardedConflict = "forwarded_header_conflict"
	ReasonForwardedMissing  = "forwarded_header_missing"
)

// ReasonUntrustedForwarding counts, as a signal that refuses nothing, a
// request carrying a forwarding header that keygate reads under some
// preset but its preset does not trust.
const ReasonUntrustedForwarding = "untrusted_forwarding_header"

// untrusted lists the forwarding headers some preset reads that f does not
// trust, canonical; none under auto, which reads them all.
func (f Forwarding) untrusted() []string {
	if f.Proxy == ProxyAuto {
		return nil
	}
	var out []string
	for _, h := range []string{"X-Forwarded-Method", "X-Forwarded-Uri", "X-Forwarded-Host", "X-Original-Method", "X-Original-Uri"} {
		if !slices.Contains(f.Headers(), h) {
			out = append(out, h)
		}
	}
	return out
}

var forwardedText = map[string]string{
	ReasonForwardedRepeated: "a forwarding header the proxy sets is repeated",
	ReasonForwardedConflict: "forwarding headers disagree on the request",
	ReasonForwardedMissing:  "a forwarding header the proxy should set is missing",
}

// describe is the text of a refusal for problem: what is wrong and the
// header it is wrong in, so that an operator setting up the proxy knows
// which one to add (the preset's names, canonical).
func (f *Forwarding) describe(h http.Header, problem string) string {
	text := forwardedText[problem]
	for _, names := range [][]string{f.Method, f.Host, f.URI} {
		if _, _, p := f.pick(h, names, ""); p != problem {
			continue
		}
		var culprits []string
		for _, n := range names {
			switch k := len(h[n]); {
			case problem == ReasonForwardedMissing,
				problem == ReasonForwardedRepeated && k > 1,
				problem == ReasonForwardedConflict && k > 0:
				culprits = append(culprits, n)
			}
		}
		sep := ", "
		if problem == ReasonForwardedMissing {
			sep = " or "
		}
		return text + ": " + strings.Join(culprits, sep)
	}
	return text
}

// target is the request the proxy is asking about, or the reason to refuse
// it: its method, host, path and raw query (the fragment dropped).
func (f *Forwarding) target(r *http.Request) (method, host, path, query, problem string) {
	if method, _, problem = f.pick(r.Header, f.Method, r.Method); problem != "" {
		return "", "", "", "", problem
	}
	if host, _, problem = f.pick(r.Header, f.Host, r.Host); problem != "" {
		return "", "", "", "", problem
	}
	uri, forwarded, problem := f.pick(r.Header, f.URI, "")
	if problem != "" {
		return "", "", "", "", problem
	}
	if !forwarded || uri == "" {
		return method, host, f.ownPath(r), r.URL.RawQuery, ""
	}
	path, query = SplitURI(uri)
	return method, host, path, query, ""
}

// SplitURI splits a request target into its path and raw query at the
// first '?'. A raw '#' stays where it is: a request target has no
// fragment, and servers disagree on one (nginx ends the path or query
// there, Go keeps it as a character, so PHP behind Caddy reads a _method
// after it), so the path refuses it and the query reads past it.
func SplitURI(uri string) (path, query string) {
	path, query, _ = strings.Cut(uri, "?")
	return path, query
}

// pick reads one part of the target from the trusted headers names: the one
// value they agree on (forwarded), or fallback when none is present and the
// preset does not require them.
func (f *Forwarding) pick(h http.Header, names []string, fallback string) (v string, forwarded bool, problem string) {
	found := false
	for _, n := range names {
		vals := h[n]
		switch {
		case len(vals) == 0:
			continue
		case len(vals) > 1:
			return "", false, ReasonForwardedRepeated
		case found && vals[0] != v:
			return "", false, ReasonForwardedConflict
		}
		v, found = vals[0], true
	}
	switch {
	case found:
		return v, true, ""
	case len(names) > 0 && f.Required:
		return "", false, ReasonForwardedMissing
	}
	return fallback, false, ""
}

// ownPath is the request's own path as sent (requestPath), after the mount
// prefix under envoy.
func (f *Forwarding) ownPath(r *http.Request) string {
	p := requestPath(r)
	if f.MountPrefix == "" {
		return p
	}
	rest, ok := strings.CutPrefix(p, f.MountPrefix)
	if !ok || (rest != "" && rest[0] != '/') {
		return p
	}
	if rest == "" {
		return "/"
	}
	return rest
}
