// Package gateway holds keygate's HTTP front ends over the verification
// pipeline: the forward-auth endpoint for nginx auth_request, Traefik
// ForwardAuth and Caddy forward_auth, and (later) the reverse proxy. They
// decide from the route a request targets and the bearer token it carries,
// and answer in RFC 6750 terms that a proxy in front can act on.
package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/verify"
)

// Verifier is what a front end needs of the pipeline.
type Verifier interface {
	Verify(ctx context.Context, token string) (*verify.Result, error)
}

// ForwardAuth answers "may this request through?" for a proxy in front: 200
// with claim headers, 401 for a missing or invalid token, 403 for a valid
// token that lacks a scope or matches no route. It answers 401 rather than
// 400, 431 or 500 for every bad-token case, because nginx turns any status
// other than 2xx, 401 and 403 from auth_request into a 500 for the client.
type ForwardAuth struct {
	verifier  Verifier
	routes    *Router
	cookie    string
	fwd       Forwarding
	untrusted []string // forwarding headers fwd ignores, counted when a request carries one
	headers   []string // every configured claim header, canonical form
	metrics   *telemetry.Decisions
	log       *slog.Logger
}

// ForwardAuthConfig configures a ForwardAuth.
type ForwardAuthConfig struct {
	Verifier Verifier
	// Routes, when not empty, must match every request; a request that
	// matches none is refused with 403. With no routes, any token that
	// the pipeline accepts is enough.
	Routes []Route
	// Cookie, if set, names a cookie to take the token from when there is
	// no Authorization header.
	Cookie string
	// Forwarding says which headers name the request being asked about;
	// the zero value is the auto preset (see Forwarding).
	Forwarding Forwarding
	// Headers lists every claim header any issuer maps. All of them are set
	// on every 200, empty when the token lacks the claim, so that a proxy
	// copying them always overwrites a value the client forged.
	Headers []string
	Metrics *telemetry.Decisions // optional
	Logger  *slog.Logger         // optional
}

// NewForwardAuth builds the handler. Under the auto preset, rules that
// match on host are warned about in the log, once: the host then comes from
// X-Forwarded-Host whenever the proxy in front does not set it, so a
// client's own copy would choose the rule.
func NewForwardAuth(cfg ForwardAuthConfig) (*ForwardAuth, error) {
	f, err := newForwardAuth(cfg)
	if err != nil {
		return nil, err
	}
	if f.fwd.Proxy == ProxyAuto && slices.ContainsFunc(cfg.Routes, func(r Route) bool { return r.Host != "" }) {
		f.log.Warn("forward_auth rules match on host, and under proxy auto /auth takes the host from X-Forwarded-Host, " +
			"a client's own copy whenever the proxy in front does not set it: name the proxy (--proxy nginx|traefik|caddy|envoy) " +
			"so that only the host it sets is trusted")
	}
	return f, nil
}

// newForwardAuth is NewForwardAuth without the warning, for the proxy,
// which matches on the request's own Host.
func newForwardAuth(cfg ForwardAuthConfig) (*ForwardAuth, error) {
	if cfg.Verifier == nil {
		return nil, errors.New("gateway: forward-auth needs a verifier")
	}
	rt, err := NewRouter(cfg.Routes)
	if err != nil {
		return nil, err
	}
	fwd := cfg.Forwarding
	if fwd.Proxy == "" {
		fwd, _ = Preset(ProxyAuto)
	}
	f := &ForwardAuth{verifier: cfg.Verifier, routes: rt, cookie: cfg.Cookie, fwd: fwd, untrusted: fwd.untrusted(),
		headers: canonical(cfg.Headers), metrics: cfg.Metrics, log: cfg.Logger}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	return f, nil
}

// ServeHTTP decides on the request the proxy forwards (see Forwarding);
// forwarding headers that are repeated, disagree or are missing where the
// proxy must set them get 401 invalid_request, a path upstreams read in
// different ways 403 (see the comments below).
func (f *ForwardAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.metrics != nil {
		defer f.metrics.Begin()()
		for _, h := range f.untrusted {
			if len(r.Header[h]) > 0 {
				f.metrics.Signal(ReasonUntrustedForwarding)
				break
			}
		}
	}
	method, host, path, problem := f.fwd.target(r)
	if problem != "" {
		// 401, not 400: nginx turns any status from auth_request but 2xx,
		// 401 and 403 into a 500 for the client.
		f.deny(w, http.StatusUnauthorized, "invalid_request", problem, forwardedText[problem])
		return
	}
	route, err := f.routes.Match(host, method, path)
	switch {
	case errors.Is(err, ErrAmbiguousPath):
		// 403, not 400, for the same reason.
		f.deny(w, http.StatusForbidden, "invalid_request", "ambiguous_path", "ambiguous_path")
		return
	case err != nil:
		f.deny(w, http.StatusForbidden, "access_denied", "no_route", "no route rule matches the request")
		return
	}
	if route.Anonymous {
		f.allow(w, nil)
		return
	}
	if res, ok := f.authorize(w, r, route); ok {
		f.allow(w, res)
	}
}

// authorize takes the bearer token, verifies it and checks it against the
// route. When it refuses, it has written the answer.
func (f *ForwardAuth) authorize(w http.ResponseWriter, r *http.Request, route *Route) (*verify.Result, bool) {
	token, problem := bearer(r, f.cookie)
	switch problem {
	case "":
	case "missing":
		f.challenge(w)
		return nil, false
	default:
		f.deny(w, http.StatusUnauthorized, "invalid_request", problem, problemText[problem])
		return nil, false
	}
	res, err := f.verifier.Verify(r.Context(), token)
	if err != nil {
		f.refuse(w, r, token, err)
		return nil, false
	}
	if reason, status := route.Admits(res); reason != "" {
		code := "invalid_token"
		if status == http.StatusForbidden {
			code = "insufficient_scope"
		}
		f.deny(w, status, code, reason, reason)
		return nil, false
	}
	return res, true
}

func (f *ForwardAuth) refuse(w http.ResponseWriter, r *http.Request, token string, err error) {
	reason := verify.ReasonOf(err)
	switch {
	case reason == "insufficient_scope":
		f.deny(w, http.StatusForbidden, "insufficient_scope", reason, reason)
	case reason != "":
		f.log.Debug("token refused", "reason", reason, "token", Fingerprint(token))
		f.deny(w, http.StatusUnauthorized, "invalid_token", reason, reason)
	default: // not a verdict on the token: the client went away or the server is failing
		f.log.Warn("verification failed", "err", err, "token", Fingerprint(token))
		if f.metrics != nil {
			f.metrics.Deny("internal")
		}
		http.Error(w, "verification unavailable", http.StatusServiceUnavailable)
	}
}

// allow writes 200 with every configured claim header present.
func (f *ForwardAuth) allow(w http.ResponseWriter, res *verify.Result) {
	h := w.Header()
	for _, name := range f.headers {
		h[name] = []string{headerValue(res, name)}
	}
	if f.metrics != nil {
		f.metrics.Allow()
	}
	w.WriteHeader(http.StatusOK)
}

func headerValue(res *verify.Result, name string) string {
	if res == nil {
		return ""
	}
	for _, hv := range res.Headers {
		if hv.Name == name {
			return hv.Value
		}
	}
	return ""
}

// challenge answers a request with no credentials: RFC 6750 §3.1 says the
// challenge then carries no error code.
func (f *ForwardAuth) challenge(w http.ResponseWriter) {
	w.Header()["Www-Authenticate"] = []string{`Bearer realm="keygate"`}
	if f.metrics != nil {
		f.metrics.Deny("missing_token")
	}
	writeError(w, http.StatusUnauthorized, "unauthorized", "a bearer token is required")
}

// deny answers with an RFC 6750 challenge. description is a reason name or a
// fixed sentence: never the token or internal detail.
func (f *ForwardAuth) deny(w http.ResponseWriter, status int, code, reason, description string) {
	if status == http.StatusUnauthorized || code == "insufficient_scope" {
		w.Header()["Www-Authenticate"] = []string{`Bearer realm="keygate", error="` + code + `", error_description="` + description + `"`}
	}
	if f.metrics != nil {
		f.metrics.Deny(reason)
	}
	writeError(w, status, code, description)
}

func writeError(w http.ResponseWriter, status int, code, description string) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(status)
	w.Write([]byte(`{"error":"` + code + `","error_description":"` + description + `"}`))
}

var problemText = map[string]string{
	"duplicate_authorization": "more than one Authorization header",
	"empty_token":             "the bearer token is empty",
}

// bearer extracts the token: exactly one Authorization header with the
// Bearer scheme (RFC 6750 §2.1), or else the configured cookie.
func bearer(r *http.Request, cookie string) (token, problem string) {
	vals := r.Header["Authorization"]
	switch len(vals) {
	case 0:
		if cookie != "" {
			if c, err := r.Cookie(cookie); err == nil && c.Value != "" {
				return c.Value, ""
			}
		}
		return "", "missing"
	case 1:
	default:
		return "", "duplicate_authorization"
	}
	v := vals[0]
	const scheme = "bearer "
	if len(v) < len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		// Another scheme is no bearer credential at all: RFC 6750 §3.1
		// answers that with the bare challenge.
		return "", "missing"
	}
	token = strings.TrimLeft(v[len(scheme):], " ")
	if token == "" {
		return "", "empty_token"
	}
	// The token's characters are not checked here: the pipeline's parser
	// accepts only strict base64url and dots, and a token reaches neither
	// logs (only its fingerprint) nor the cache unless it verified.
	return token, ""
}

// Wrap is the decision as Go middleware: a request that carries an
// acceptable token (holding every scope in scopes) reaches next with the
// verified result in its context (see ResultFrom); any other is answered
// as forward-auth would answer it.
func (f *ForwardAuth) Wrap(next http.Handler, scopes []string) http.Handler {
	route := &Route{Scopes: scopes}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.metrics != nil {
			defer f.metrics.Begin()()
		}
		res, ok := f.authorize(w, r, route)
		if !ok {
			return
		}
		if f.metrics != nil {
			f.metrics.Allow()
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), resultKey{}, res)))
	})
}

type resultKey struct{}

// ResultFrom returns the verified token Wrap put in the request context.
func ResultFrom(ctx context.Context) (*verify.Result, bool) {
	res, ok := ctx.Value(resultKey{}).(*verify.Result)
	return res, ok
}
