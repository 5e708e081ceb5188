package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"time"

	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/verify"
)

// Proxy is the reverse-proxy front end: it routes each request by host, path
// prefix and method, checks its token against the route, strips any
// client-sent copies of the claim headers, sets them from the verified token,
// and forwards the request (streaming bodies and WebSocket upgrades) to the
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
		return nil, errors.New("gateway: the proxy needs at least one route")
	}
	auth, err := NewForwardAuth(ForwardAuthConfig{Verifier: cfg.Verifier, Routes: cfg.Routes, Cookie: cfg.Cookie,
		Headers: cfg.Headers, Metrics: cfg.Metrics, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	tr := cfg.Transport
	if tr == nil {
		tr = NewTransport()
	}
	p := &Proxy{auth: auth, routes: auth.routes}
	for i, r := range cfg.Routes {
		u, err := url.Parse(r.Upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("gateway: route " + r.PathPrefix + ": upstream is not an http(s) URL")
		}
		p.backends = append(p.backends, p.backend(u, tr, auth.log, i))
	}
	return p, nil
}

func (p *Proxy) backend(u *url.URL, tr http.RoundTripper, log *slog.Logger, i int) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
			pr.Out.Host = pr.In.Host // the upstream sees the host the client asked for
		},
		Transport:     tr,
		FlushInterval: -1, // stream: flush every write (server-sent events, long polls)
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("upstream failed", "route", i, "upstream", u.Host, "err", err)
			if errors.Is(err, context.Canceled) {
				return // the client went away
			}
			writeError(w, http.StatusBadGateway, "bad_gateway", "the upstream service did not answer")
		},
	}
}

// ServeHTTP routes, decides and forwards.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := p.auth
	if a.metrics != nil {
		defer a.metrics.Begin()()
	}
	route, ok := p.routes.Match(r.Host, r.Method, r.URL.EscapedPath())
	if !ok {
		a.deny(w, http.StatusNotFound, "not_found", "no_route", "no route matches the request")
		return
	}
	// Client-sent claim headers never reach an upstream, whatever the route:
	// each is replaced (empty on an anonymous route) in the request the
	// backend copies its outgoing headers from.
	var res *verify.Result
	if !route.Anonymous {
		var ok bool
		if res, ok = a.authorize(w, r, route); !ok {
			return
		}
	}
	for _, name := range a.headers {
		v := ""
		if res != nil {
			v = headerValue(res, name)
		}
		r.Header[name] = []string{v}
	}
	if a.metrics != nil {
		a.metrics.Allow()
	}
	p.backends[p.routes.index(route)].ServeHTTP(w, r)
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
