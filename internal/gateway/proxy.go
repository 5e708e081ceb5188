package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/verify"
)

// Proxy is the reverse-proxy front end: it routes each request by host, path
// prefix and method (the path read and checked as Router.Match says, and
// forwarded in the canonical form the route was chosen by), checks its token
// against the route, strips any
// client-sent copies of the claim headers from the outgoing request, sets
// them there from the verified token, and forwards the request (streaming bodies and WebSocket upgrades) to the
// route's upstream over a pooled keep-alive transport.
type Proxy struct {
	auth     *ForwardAuth // the same decision logic as forward-auth
	routes   *Router
	backends []*httputil.ReverseProxy // parallel to routes
}

// ProxyConfig configures a Proxy.
type ProxyConfig struct {
	Verifier Verifier
	Routes   []Route // each needs an Upstream
	Cookie   string
	Headers  []string // claim headers: stripped from requests, then set
	// Transport carries requests upstream (default: NewTransport()).
	Transport http.RoundTripper
	Metrics   *telemetry.Decisions
	Logger    *slog.Logger
	AccessLog *AccessLog // optional: a line per decision
	// Tracer, if set, traces each request (keygate.proxy, and
	// keygate.upstream around the upstream's answer) and sends the
	// upstream a traceparent naming keygate's span.
	Tracer *telemetry.Tracer
}

// NewTransport returns the upstream transport: keep-alive pools sized for a
// gateway, and timeouts so a stuck upstream cannot hold connections forever.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // never send upstream traffic through an environment proxy
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
}

// NewProxy builds the proxy.
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	if len(cfg.Routes) == 0 {
		return nil, errors.New("the proxy needs at least one route")
	}
	auth, err := newForwardAuth(ForwardAuthConfig{Verifier: cfg.Verifier, Routes: cfg.Routes, Cookie: cfg.Cookie,
		Headers: cfg.Headers, Metrics: cfg.Metrics, Logger: cfg.Logger, AccessLog: cfg.AccessLog, Tracer: cfg.Tracer})
	if err != nil {
		return nil, err
	}
	tr := cfg.Transport
	if tr == nil {
		tr = NewTransport()
	}
	p := &Proxy{auth: auth, routes: auth.routes}
	tr = splitTransport{std: tr, upgrade: http1Only(tr)}
	for i, r := range cfg.Routes {
		u, err := url.Parse(r.Upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("route " + r.PathPrefix + ": upstream is not an http(s) URL")
		}
		p.backends = append(p.backends, p.backend(u, tr, auth.log, i))
	}
	return p, nil
}

func (p *Proxy) backend(u *url.URL, tr http.RoundTripper, log *slog.Logger, i int) *httputil.ReverseProxy {
	tracing := p.auth.tracer != nil
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			d, _ := pr.In.Context().Value(decisionKey{}).(*decision)
			if d != nil {
				// The path the route was chosen by, never the raw one an
				// upstream could read another way. Every character in it
				// may appear raw, so EscapedPath gives it back as it is.
				pr.Out.URL.Path, pr.Out.URL.RawPath = unescape(d.path), d.path
				// Upper case, as the route was chosen by: an upstream
				// that compares methods byte for byte reads it so too.
				pr.Out.Method = d.method
			}
			pr.SetURL(u)
			pr.SetXForwarded()
			pr.Out.Host = pr.In.Host // the upstream sees the host the client asked for
			if upgradesToHTTP(pr.Out.Header) {
				// Decline the offer, as a server that does not take it
				// up would, and forward the request as an ordinary one.
				delete(pr.Out.Header, "Upgrade")
				delete(pr.Out.Header, "Connection")
				delete(pr.Out.Header, "Http2-Settings")
			}
			// The claim headers go on the outgoing request, after
			// ReverseProxy has removed the hop-by-hop headers: set on
			// the incoming one, a client could have them removed by
			// naming them in Connection.
			p.setClaims(pr.Out.Header, d)
			if tracing {
				// The upstream's spans become children of keygate's;
				// with tracing off, the client's trace context passes
				// through as any other header.
				telemetry.Inject(pr.In.Context(), pr.Out.Header)
			}
		},
		Transport:     tr,
		FlushInterval: -1, // stream: flush every write (server-sent events, long polls)
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("upstream failed", "route", i, "upstream", u.Host, "err", err)
			if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
				telemetry.Fail(span, "upstream_failed")
			}
			if errors.Is(err, context.Canceled) {
				return // the client went away
			}
			writeError(w, http.StatusBadGateway, "bad_gateway", "the upstream service did not answer")
		},
	}
	if tracing {
		rp.ModifyResponse = func(resp *http.Response) error {
			if span := trace.SpanFromContext(resp.Request.Context()); span.IsRecording() {
				span.SetAttributes(telemetry.AttrStatus.Int(resp.StatusCode))
			}
			return nil
		}
	}
	return rp
}

// splitTransport sends protocol upgrades on their own transport. ReverseProxy
// re-adds Upgrade (with Connection: Upgrade) to the outgoing request only for
// an upgrade, after removing every client-sent hop-by-hop header.
type splitTransport struct {
	std, upgrade http.RoundTripper
}

func (t splitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(r.Header["Upgrade"]) > 0 {
		return t.upgrade.RoundTrip(r)
	}
	return t.std.RoundTrip(r)
}

// http1Only returns a copy of tr that speaks only HTTP/1.1, the one version
// with protocol upgrades. net/http's Transport keeps to HTTP/1.1 by itself
// only for "Upgrade: websocket" (Request.requiresHTTP1); any other upgrade
// to an https upstream that offers h2 would go out as HTTP/2 and be refused
// ("invalid Upgrade request header"). Its connections are not kept alive:
// an upgrade takes its connection over, and upgrades are rare enough that
// the pool a refused one would leave is not worth keeping (and each reload
// builds a new copy). Another RoundTripper is used as it is.
func http1Only(tr http.RoundTripper) http.RoundTripper {
	t, ok := tr.(*http.Transport)
	if !ok {
		return tr
	}
	h1 := t.Clone()
	h1.Protocols = new(http.Protocols)
	h1.Protocols.SetHTTP1(true)
	h1.ForceAttemptHTTP2 = false
	h1.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	if h1.TLSClientConfig != nil {
		h1.TLSClientConfig.NextProtos = nil // no ALPN: the server speaks HTTP/1.1
	}
	h1.DisableKeepAlives = true
	return h1
}

// upgradesToHTTP reports whether an Upgrade header offers a protocol that
// carries HTTP requests: h2c (RFC 7540 §3.2), h2, HTTP/x or TLS/x (RFC 2817).
// An upstream's server takes those up by itself, whatever the path.
func upgradesToHTTP(h http.Header) bool {
	for _, v := range h["Upgrade"] {
		for _, p := range strings.Split(v, ",") {
			name, _, _ := strings.Cut(strings.Trim(p, " \t"), "/")
			for _, bad := range []string{"h2c", "h2", "http", "tls"} {
				if strings.EqualFold(name, bad) {
					return true
				}
			}
		}
	}
	return false
}

// ServeHTTP routes, decides and forwards.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := p.auth
	if a.metrics != nil {
		defer a.metrics.Begin()()
	}
	start, sent := a.access.start(), requestPath(r)
	ctx := r.Context()
	var span trace.Span // nil: tracing off
	if a.tracer != nil {
		ctx, span = a.tracer.StartServer(ctx, telemetry.SpanProxy, r.Header)
		defer span.End()
	}
	refuse := func(dec Decision) {
		a.write(w, dec)
		a.access.write(telemetry.FrontProxy, r.Method, r.Host, sent, r.Header, &dec, start)
		if span != nil {
			setDecision(span, telemetry.FrontProxy, r.Method, &dec)
		}
	}
	if strings.EqualFold(r.Method, http.MethodConnect) {
		// A tunnel is no request to decide on, and net/http's Transport
		// would send it upstream in authority form.
		refuse(a.refusal(http.StatusMethodNotAllowed, "invalid_request", "connect_refused", "the proxy does not tunnel"))
		return
	}
	route, i, path, method, err := p.routes.match(r.Host, r.Method, sent, r.Header, r.URL.RawQuery)
	switch reason := RequestRefusal(err); {
	case reason != "":
		refuse(a.refusal(http.StatusBadRequest, "invalid_request", reason, reason))
		return
	case err != nil:
		refuse(a.refusal(http.StatusNotFound, "not_found", "no_route", "no route matches the request"))
		return
	}
	d := &decision{method: method}
	if !route.Anonymous {
		dec := a.authorize(ctx, r.Header, route)
		if !dec.Allowed() {
			refuse(dec)
			return
		}
		d.res = dec.Result
	}
	d.path = path.canonical(route.AllowPathParams)
	if a.metrics != nil {
		a.metrics.Allow()
	}
	// The line is the decision's: its latency is keygate's, before the
	// upstream is asked.
	a.access.write(telemetry.FrontProxy, r.Method, r.Host, sent, r.Header, &Decision{Status: http.StatusOK, Result: d.res}, start)
	if span != nil {
		// The proxy span's attributes are the decision's; the status
		// the upstream answered is on keygate.upstream.
		allowed := Decision{Status: http.StatusOK, Result: d.res}
		setDecision(span, telemetry.FrontProxy, r.Method, &allowed)
		var up trace.Span
		ctx, up = telemetry.StartChild(ctx, telemetry.SpanUpstream, trace.SpanKindClient)
		defer up.End()
	}
	p.backends[i].ServeHTTP(w, r.WithContext(context.WithValue(ctx, decisionKey{}, d)))
}

// decision is what ServeHTTP decided about a request, for the backend's
// Rewrite to apply to the outgoing request.
type decision struct {
	res    *verify.Result // nil on an anonymous route
	path   string         // canonical, percent-encoded: what the route was chosen by
	method string         // upper case: what the route was chosen by
}

// requestPath is the path of the request target as the client sent it
// (r.URL.EscapedPath re-encodes a raw backslash, for one, as %5C).
func requestPath(r *http.Request) string {
	if u := r.RequestURI; strings.HasPrefix(u, "/") {
		if i := strings.IndexByte(u, '?'); i >= 0 {
			u = u[:i]
		}
		return u
	}
	return r.URL.EscapedPath()
}

type decisionKey struct{}

// setClaims makes the claim headers of h those of the decision: every
// client-sent copy is removed, in any case and with underscores for dashes
// (CGI-style upstreams, PHP among them, read X_Auth_Subject as
// X-Auth-Subject), and each is then set, empty on an anonymous route or
// when the token lacks the claim. Without a decision (which ServeHTTP
// always attaches) each is set empty.
func (p *Proxy) setClaims(h http.Header, d *decision) {
	names := p.auth.headers
	if len(names) == 0 {
		return
	}
	for k := range h {
		for _, name := range names {
			if sameHeader(k, name) {
				delete(h, k)
				break
			}
		}
	}
	for _, name := range names {
		v := ""
		if d != nil && d.res != nil {
			v = headerValue(d.res, name)
		}
		h[name] = []string{v}
	}
}

// sameHeader reports whether two header names are the same ignoring ASCII
// case and treating '_' as '-'.
func sameHeader(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == '_' {
			x = '-'
		}
		if y == '_' {
			y = '-'
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// canonical returns header names in canonical form, without duplicates.
func canonical(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, h := range names {
		h = textproto.CanonicalMIMEHeaderKey(h)
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}
