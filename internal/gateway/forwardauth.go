// Package gateway holds keygate's HTTP front ends over the verification
// pipeline: the forward-auth endpoint for nginx auth_request, Traefik
// ForwardAuth and Caddy forward_auth, and the reverse proxy; package
// extauthz puts the same decision behind Envoy's ext_authz. They decide
// from the route a request targets and the bearer token it carries, and
// answer in RFC 6750 terms that a proxy in front can act on.
package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

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
// It reads the request it is asked about from the forwarding headers (see
// Forwarding) and leaves the decision to its Decider.
type ForwardAuth struct {
	Decider
	fwd       Forwarding
	untrusted []string // forwarding headers fwd ignores, counted when a request carries one
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
	Headers   []string
	Metrics   *telemetry.Decisions // optional
	Logger    *slog.Logger         // optional
	AccessLog *AccessLog           // optional: a line per decision
	Tracer    *telemetry.Tracer    // optional: a span per decision
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
	d, err := NewDecider(DeciderConfig{Verifier: cfg.Verifier, Routes: cfg.Routes, Cookie: cfg.Cookie, Headers: cfg.Headers,
		Metrics: cfg.Metrics, Logger: cfg.Logger, AccessLog: cfg.AccessLog, Tracer: cfg.Tracer})
	if err != nil {
		return nil, err
	}
	fwd := cfg.Forwarding
	if fwd.Proxy == "" {
		fwd, _ = Preset(ProxyAuto)
	}
	return &ForwardAuth{Decider: *d, fwd: fwd, untrusted: fwd.untrusted()}, nil
}

// ServeHTTP decides on the request the proxy forwards (see Forwarding);
// forwarding headers that are repeated, disagree or are missing where the
// proxy must set them get 401 invalid_request, a path upstreams read in
// different ways 403 (see Decide).
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
	start := f.access.start()
	ctx := r.Context()
	var span trace.Span // nil: tracing off
	if f.tracer != nil {
		ctx, span = f.tracer.StartServer(ctx, telemetry.SpanAuth, r.Header)
	}
	method, host, path, query, problem := f.fwd.target(r)
	var dec Decision
	if problem != "" {
		// 401, not 400: nginx turns any status from auth_request but 2xx,
		// 401 and 403 into a 500 for the client.
		dec = f.refusal(http.StatusUnauthorized, "invalid_request", problem, f.fwd.describe(r.Header, problem))
	} else {
		dec = f.Decide(ctx, method, host, path, query, r.Header)
	}
	f.write(w, dec)
	if span != nil {
		EndSpan(span, telemetry.FrontForwardAuth, method, &dec)
	}
	f.access.write(telemetry.FrontForwardAuth, method, host, path, r.Header, &dec, start)
}

// Decider takes the decision every front end takes on a request: which
// route covers it (Router.Match: the path canonicalised, ambiguous paths
// refused), whether it carries a bearer token the pipeline accepts, and
// whether that token holds what the route asks for; and on an allowed
// request, which claim headers to set. The front ends differ only in where
// they read the request from (forwarding headers, the request itself, an
// Envoy CheckRequest) and how they write the answer. It counts each
// decision in its metrics.
type Decider struct {
	verifier Verifier
	routes   *Router
	cookie   string
	headers  []string // every configured claim header, canonical form
	metrics  *telemetry.Decisions
	log      *slog.Logger
	access   *AccessLog
	tracer   *telemetry.Tracer
}

// DeciderConfig configures a Decider; the fields are ForwardAuthConfig's.
type DeciderConfig struct {
	Verifier  Verifier
	Routes    []Route
	Cookie    string
	Headers   []string
	Metrics   *telemetry.Decisions // optional
	Logger    *slog.Logger         // optional
	AccessLog *AccessLog           // optional
	Tracer    *telemetry.Tracer    // optional
}

// NewDecider builds a Decider.
func NewDecider(cfg DeciderConfig) (*Decider, error) {
	if cfg.Verifier == nil {
		return nil, errors.New("forward-auth needs a verifier")
	}
	rt, err := NewRouter(cfg.Routes)
	if err != nil {
		return nil, err
	}
	d := &Decider{verifier: cfg.Verifier, routes: rt, cookie: cfg.Cookie, headers: canonical(cfg.Headers),
		metrics: cfg.Metrics, log: cfg.Logger, access: cfg.AccessLog, tracer: cfg.Tracer}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	return d, nil
}

// Decision is a Decider's answer about one request, for a front end to
// write in its own terms.
type Decision struct {
	// Status is 200 when the request may through; 401 for a missing or
	// invalid token, 403 for a token short of a scope, a request no route
	// covers or an ambiguous path, 503 when verification itself failed
	// (no verdict on the token: the client went away or the server is
	// failing).
	Status int
	// Error and Description are the RFC 6749 error body's error and
	// error_description of a refusal: a reason name or a fixed sentence,
	// never the token or internal detail.
	Error, Description string
	// Reason is what the refusal counts as in keygate_decisions_total.
	Reason string
	// Challenge is the WWW-Authenticate value to send, "" for none.
	Challenge string
	// Result is the verified token of an allowed request; nil on an
	// anonymous route.
	Result *verify.Result
}

// Allowed reports whether the request may through.
func (d *Decision) Allowed() bool { return d.Status == http.StatusOK }

// Body is the JSON error body of a refusal (RFC 6749 §5.2's shape).
func (d *Decision) Body() string {
	return `{"error":"` + d.Error + `","error_description":"` + d.Description + `"}`
}

// LogAccess writes the access log's line for a decision a front end took
// through Decide, begun at start (AccessStart); nothing without a log.
func (d *Decider) LogAccess(frontend, method, host, path string, h http.Header, dec *Decision, start time.Time) {
	d.access.write(frontend, method, host, path, h, dec, start)
}

// AccessStart is when a decision begins, for LogAccess: the zero time,
// without a clock read, when there is no access log.
func (d *Decider) AccessStart() time.Time { return d.access.start() }

// Tracer is the Decider's tracer; nil when tracing is off.
func (d *Decider) Tracer() *telemetry.Tracer { return d.tracer }

// EndSpan sets a decision's attributes on span and ends it: the front end,
// the method, the decision and its reason, the status, and for a verified
// token its issuer, kid and alg; never the token or another claim. A 503
// (no verdict: verification itself failed) marks the span failed.
func EndSpan(span trace.Span, frontend, method string, dec *Decision) {
	setDecision(span, frontend, method, dec)
	span.End()
}

func setDecision(span trace.Span, frontend, method string, dec *Decision) {
	if !span.IsRecording() {
		return // an unsampled trace: no attributes to build
	}
	decision := "deny"
	if dec.Allowed() {
		decision = "allow"
	}
	span.SetAttributes(telemetry.AttrFrontend.String(frontend), telemetry.AttrMethod.String(method),
		telemetry.AttrDecision.String(decision), telemetry.AttrStatus.Int(dec.Status))
	if dec.Reason != "" {
		span.SetAttributes(telemetry.AttrReason.String(dec.Reason))
	}
	if r := dec.Result; r != nil {
		span.SetAttributes(telemetry.AttrIssuer.String(r.Issuer), telemetry.AttrKeyID.String(r.KeyID))
		if r.Token != nil {
			span.SetAttributes(telemetry.AttrAlg.String(r.Token.Header.Alg.String()))
		}
	}
	if dec.Status >= http.StatusInternalServerError {
		telemetry.Fail(span, dec.Reason)
	}
}

// ClaimHeaders lists every claim header the Decider's issuers may set,
// canonical; an allowed request's values come from HeaderValue.
func (d *Decider) ClaimHeaders() []string { return d.headers }

// HeaderValue is the value of the claim header name (canonical) for res;
// "" when res is nil (an anonymous route) or the token lacks the claim.
func HeaderValue(res *verify.Result, name string) string { return headerValue(res, name) }

// Decide decides on a request to host with method, path (percent-encoded
// as sent) and raw query, the token taken from h: its one Authorization
// header with the Bearer scheme, or else the configured cookie. A path or
// a method upstreams read in different ways, and a method that is not a
// token, are refused with 403 invalid_request (Router.Match; see
// RequestRefusal). It counts the decision.
func (d *Decider) Decide(ctx context.Context, method, host, path, query string, h http.Header) Decision {
	route, err := d.routes.Match(host, method, path, h, query)
	if err != nil {
		// 403, not 400: nginx turns any status from auth_request but 2xx,
		// 401 and 403 into a 500 for the client.
		return d.matchRefusal(err, http.StatusForbidden)
	}
	var dec Decision
	if !route.Anonymous {
		if dec = d.authorize(ctx, h, route); !dec.Allowed() {
			return dec
		}
	}
	if d.metrics != nil {
		d.metrics.Allow()
	}
	dec.Status = http.StatusOK
	return dec
}

// matchRefusal is the refusal of a request Router.Match found no route
// for: the request-reading errors with status (each front end answers
// them as its proxy needs), no route with 403.
func (d *Decider) matchRefusal(err error, status int) Decision {
	if reason := RequestRefusal(err); reason != "" {
		return d.refusal(status, "invalid_request", reason, reason)
	}
	return d.refusal(http.StatusForbidden, "access_denied", "no_route", "no route rule matches the request")
}

// RequestRefusal is the reason for refusing a request whose path or method
// upstreams read in different ways, or whose method is not a token;
// "" for any other error.
func RequestRefusal(err error) string {
	switch {
	case errors.Is(err, ErrAmbiguousPath):
		return ReasonAmbiguousPath
	case errors.Is(err, ErrAmbiguousMethod):
		return ReasonAmbiguousMethod
	case errors.Is(err, ErrInvalidMethod):
		return ReasonInvalidMethod
	}
	return ""
}

// Reasons for refusing a request keygate reads in more than one way.
const (
	ReasonAmbiguousPath   = "ambiguous_path"
	ReasonAmbiguousMethod = "ambiguous_method"
	ReasonInvalidMethod   = "invalid_method"
)

// authorize takes the bearer token from h, verifies it and checks it
// against the route. An allowed decision is not counted: the caller counts
// it once it has let the request through.
func (d *Decider) authorize(ctx context.Context, h http.Header, route *Route) Decision {
	token, problem := bearer(h, d.cookie)
	switch problem {
	case "":
	case "missing":
		// RFC 6750 §3.1: a request with no credentials gets a challenge
		// without an error code.
		if d.metrics != nil {
			d.metrics.Deny("missing_token")
		}
		return Decision{Status: http.StatusUnauthorized, Error: "unauthorized", Description: "a bearer token is required",
			Reason: "missing_token", Challenge: `Bearer realm="keygate"`}
	default:
		return d.refusal(http.StatusUnauthorized, "invalid_request", problem, problemText[problem])
	}
	res, err := d.verifier.Verify(ctx, token)
	if err != nil {
		return d.refuse(token, err)
	}
	if reason, status := route.Admits(res); reason != "" {
		code := "invalid_token"
		if status == http.StatusForbidden {
			code = "insufficient_scope"
		}
		return d.refusal(status, code, reason, reason)
	}
	return Decision{Status: http.StatusOK, Result: res}
}

func (d *Decider) refuse(token string, err error) Decision {
	reason := verify.ReasonOf(err)
	switch {
	case reason == "insufficient_scope":
		return d.refusal(http.StatusForbidden, "insufficient_scope", reason, reason)
	case reason != "":
		d.log.Debug("token refused", "reason", reason, "token", Fingerprint(token))
		return d.refusal(http.StatusUnauthorized, "invalid_token", reason, reason)
	default: // not a verdict on the token: the client went away or the server is failing
		d.log.Warn("verification failed", "err", err, "token", Fingerprint(token))
		if d.metrics != nil {
			d.metrics.Deny("internal")
		}
		return Decision{Status: http.StatusServiceUnavailable, Error: "temporarily_unavailable",
			Description: "verification unavailable", Reason: "internal"}
	}
}

// refusal counts and returns a refusal with an RFC 6750 challenge (on a
// 401, and on 403 insufficient_scope). description is a reason name or a
// fixed sentence: never the token or internal detail.
func (d *Decider) refusal(status int, code, reason, description string) Decision {
	dec := Decision{Status: status, Error: code, Description: description, Reason: reason}
	if status == http.StatusUnauthorized || code == "insufficient_scope" {
		dec.Challenge = `Bearer realm="keygate", error="` + code + `", error_description="` + description + `"`
	}
	if d.metrics != nil {
		d.metrics.Deny(reason)
	}
	return dec
}

// write answers with dec: 200 with every configured claim header present,
// or the refusal.
func (d *Decider) write(w http.ResponseWriter, dec Decision) {
	switch dec.Status {
	case http.StatusOK:
		h := w.Header()
		for _, name := range d.headers {
			h[name] = headerValues(dec.Result, name)
		}
		w.WriteHeader(http.StatusOK)
		return
	case http.StatusServiceUnavailable:
		http.Error(w, dec.Description, http.StatusServiceUnavailable)
		return
	}
	if dec.Challenge != "" {
		w.Header()["Www-Authenticate"] = []string{dec.Challenge}
	}
	writeError(w, dec.Status, dec.Error, dec.Description)
}

// Authorize is the decision of a front end with no routes, such as the Go
// middleware: the request must carry a bearer token (taken from h as Decide
// takes it) that the pipeline accepts and that holds every scope in scopes.
// It counts a refusal but not an allowed request: the caller counts that
// once it has let the request through.
func (d *Decider) Authorize(ctx context.Context, h http.Header, scopes []string) Decision {
	return d.authorize(ctx, h, &Route{Scopes: scopes})
}

func headerValue(res *verify.Result, name string) string { return headerValues(res, name)[0] }

// emptyValue is the header value of a claim the token lacks.
var emptyValue = []string{""}

// headerValues returns the claim header name's value as the verification
// rendered it, shared by every request with the token ("" when the
// token's issuer maps no such header).
func headerValues(res *verify.Result, name string) []string {
	if res == nil {
		return emptyValue
	}
	for i := range res.Headers {
		if res.Headers[i].Name == name {
			return res.Headers[i].Values()
		}
	}
	return emptyValue
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

// bearer extracts the token from h: exactly one Authorization header with
// the Bearer scheme (RFC 6750 §2.1), or else the configured cookie.
func bearer(h http.Header, cookie string) (token, problem string) {
	vals := h["Authorization"]
	switch len(vals) {
	case 0:
		if cookie != "" {
			if c, err := (&http.Request{Header: h}).Cookie(cookie); err == nil && c.Value != "" {
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
