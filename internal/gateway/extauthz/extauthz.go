// Package extauthz is keygate's Envoy external authorization front end: the
// gRPC service envoy.service.auth.v3.Authorization, whose Check Envoy's
// ext_authz filter (and Istio's CUSTOM authorization, which is that filter)
// calls for every request before it routes it.
//
// It takes the same decision as forward-auth, with the same pipeline and
// verified-token cache (gateway.Decider): route rules, path
// canonicalisation and the refusal of ambiguous paths, scopes, claim
// headers. What it decides on comes only from the CheckRequest's
// attributes.request.http, which Envoy fills from the request itself: the
// method, the host (:authority), the path (:path, its query dropped) and,
// from the headers, the one Authorization header or the configured cookie.
// No X-Forwarded-* or X-Original-* header is read: a client can add those,
// and the attributes are authoritative.
//
// # Answers
//
// An allowed request gets an OkHttpResponse that sets each claim header the
// token fills (overwriting every client-sent copy) and removes every other
// claim header keygate may set and every spelling of each with '_' for some
// '-' (headers_to_remove), so that a client's forged X-Auth-Scopes never
// reaches the upstream, whatever the token holds. A refused one gets a
// DeniedHttpResponse that Envoy sends the client as it is: 401 with the RFC
// 6750 WWW-Authenticate challenge forward-auth sends, 403 for a missing
// scope or a request no rule covers, 400 for an ambiguous path (Envoy,
// unlike nginx's auth_request, passes a 400 on), 503 when verification
// itself failed; each with keygate's JSON error body and the reason in an
// x-keygate-reason header. A CheckRequest may be up to MaxRecvMsgSize: a
// token over max_token_size gets keygate's own 401 too_large, not a
// transport error.
package extauthz

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"go.opentelemetry.io/otel/trace"

	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/telemetry"
)

// FrontEnd is the front end's name in keygate_decisions_total.
const FrontEnd = "envoy_grpc"

// Limits of the gRPC server.
const (
	// MaxRecvMsgSize bounds a whole CheckRequest: the request's headers
	// (Envoy's max_request_headers_kb is 60 KiB by default, and keygate's
	// traffic listener reads 64 KiB) and the rest of the attributes
	// (addresses, TLS session, metadata), with room to spare, so that a
	// token over max_token_size gets keygate's own 401 too_large. A
	// larger message is refused by gRPC (RESOURCE_EXHAUSTED), which Envoy
	// with failure_mode_allow: false answers with 403. with_request_body
	// must stay unset: a body would count here, and keygate does not read
	// it.
	MaxRecvMsgSize = 256 << 10
	// MaxHeaderBytes bounds the HTTP/2 headers of a gRPC call (its
	// metadata, not the request Envoy asks about).
	MaxHeaderBytes = 64 << 10
)

// ReasonHeader carries a refusal's reason to the client (and Envoy's access
// log, as %RESPONSE_HEADERS(x-keygate-reason)%).
const ReasonHeader = "x-keygate-reason"

// Config configures a Service.
type Config struct {
	// Decider returns the decider in force; it is called once per check,
	// so that a configuration reload swaps it between two checks.
	Decider func() *gateway.Decider
	// Metrics, if set, counts checks in flight and the refusals the
	// Service makes itself (the Decider counts its own decisions).
	Metrics *telemetry.Decisions
	Logger  *slog.Logger // nil discards logs
	// Tracer, if set, traces each check (keygate.ext_authz) as a child of
	// the traceparent among the CheckRequest's headers.
	Tracer *telemetry.Tracer
}

// Service implements envoy.service.auth.v3.Authorization.
type Service struct {
	authv3.UnimplementedAuthorizationServer
	decider func() *gateway.Decider
	metrics *telemetry.Decisions
	log     *slog.Logger
	tracer  *telemetry.Tracer
	names   atomic.Pointer[claimNames] // of the last decider seen
}

var _ authv3.AuthorizationServer = (*Service)(nil)

// New returns a Service.
func New(cfg Config) *Service {
	s := &Service{decider: cfg.Decider, metrics: cfg.Metrics, log: cfg.Logger, tracer: cfg.Tracer}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// claimNames are a decider's claim headers as Envoy writes header names
// (lower case), and every '_' spelling of them.
type claimNames struct {
	d           *gateway.Decider
	names       []string // lower case, in the decider's order
	underscored []string // lower case, always removed
}

func (s *Service) claimNames(d *gateway.Decider) *claimNames {
	if c := s.names.Load(); c != nil && c.d == d {
		return c
	}
	c := &claimNames{d: d}
	for _, h := range d.ClaimHeaders() {
		c.names = append(c.names, strings.ToLower(h))
		for _, u := range gateway.Underscored(h) {
			c.underscored = append(c.underscored, strings.ToLower(u))
		}
	}
	s.names.Store(c)
	return c
}

// Check decides on the request Envoy describes. Its error is always nil: a
// request it cannot decide on is refused in HTTP terms, so that Envoy never
// falls back to failure_mode_allow or status_on_error for it. An allowed
// answer shares its status and headers_to_remove with other answers: it
// is for gRPC to marshal, not to modify.
func (s *Service) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	if s.metrics != nil {
		defer s.metrics.Begin()()
	}
	d := s.decider()
	hr := req.GetAttributes().GetRequest().GetHttp()
	if hr == nil {
		s.log.Debug("check request without HTTP attributes: is the caller Envoy's HTTP ext_authz filter?")
		return s.refuse(http.StatusBadRequest, "invalid_request", "invalid_request", "the check request carries no HTTP request attributes"), nil
	}
	creds := credentialHeaders(hr)
	defer creds.release()
	h := creds.h
	path, query := gateway.SplitURI(hr.GetPath())
	start := d.AccessStart()
	var span trace.Span // nil: tracing off
	if s.tracer != nil {
		// The trace context of the request Envoy asks about, not of
		// the gRPC call: Envoy's own span, when it traces, is in both.
		ctx, span = s.tracer.StartServer(ctx, telemetry.SpanExtAuthz, h)
	}
	dec := d.Decide(ctx, hr.GetMethod(), hr.GetHost(), path, query, h)
	switch dec.Reason {
	case gateway.ReasonAmbiguousPath, gateway.ReasonAmbiguousMethod, gateway.ReasonInvalidMethod:
		// Forward-auth answers 403 because nginx turns a 400 from
		// auth_request into a 500; Envoy sends the client what it gets.
		dec.Status = http.StatusBadRequest
	}
	d.LogAccess(FrontEnd, hr.GetMethod(), hr.GetHost(), path, h, &dec, start)
	if span != nil {
		gateway.EndSpan(span, FrontEnd, hr.GetMethod(), &dec)
	}
	if dec.Allowed() {
		return s.allow(d, &dec), nil
	}
	return denied(&dec), nil
}

// checkHeaders are the headers of one Check that its decision reads, in a
// map reused from Check to Check: nothing the decision returns keeps the
// map (the token is a string of the request's own), so it is cleared and
// pooled once the answer is built.
type checkHeaders struct {
	h http.Header
	// first holds the first value of each header credentialHeaders
	// keeps under a fixed name, so that the usual request, one of each,
	// allocates no slice.
	first [4][1]string
}

var credentialPool = sync.Pool{New: func() any { return &checkHeaders{h: make(http.Header, 4)} }}

// release clears c and returns it to the pool.
func (c *checkHeaders) release() {
	clear(c.h)
	c.first = [4][1]string{}
	credentialPool.Put(c)
}

// add keeps the value v of the header named k if the decision reads it,
// under its canonical name.
func (c *checkHeaders) add(k, v string) {
	slot := -1
	switch k { // Envoy's header names are lower case: no case folding for them
	case "authorization":
		k, slot = "Authorization", 0
	case "cookie":
		k, slot = "Cookie", 1
	case "traceparent": // for the access log's trace id and the span's parent
		k, slot = "Traceparent", 2
	case "tracestate":
		k, slot = "Tracestate", 3
	default:
		switch {
		case lowerASCII(k):
			// Case folding matches no other name of these in lower
			// case, ASCII only; only the override headers are left.
			if !gateway.IsMethodOverrideHeader(k) {
				return
			}
		case !isASCII(k):
			// No HTTP front end lets such a name through, and Unicode
			// case folding would read "coo\u212Aie" (a Kelvin sign) as
			// Cookie: a name outside ASCII names nothing here.
			return
		case strings.EqualFold(k, "authorization"):
			k, slot = "Authorization", 0
		case strings.EqualFold(k, "cookie"):
			k, slot = "Cookie", 1
		case strings.EqualFold(k, "traceparent"):
			k, slot = "Traceparent", 2
		case strings.EqualFold(k, "tracestate"):
			k, slot = "Tracestate", 3
		case gateway.IsMethodOverrideHeader(k):
			// The method an upstream may run the request as (Envoy
			// passes a name with '_' on by default), under the name
			// as sent.
		default:
			return
		}
	}
	if vs := c.h[k]; len(vs) > 0 || slot < 0 {
		c.h[k] = append(vs, v)
		return
	}
	c.first[slot][0] = v
	c.h[k] = c.first[slot][:1:1]
}

// isASCII reports whether s has no byte outside ASCII.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// lowerASCII reports whether s has no upper-case letter and no byte
// outside ASCII.
func lowerASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || c >= 'A' && c <= 'Z' {
			return false
		}
	}
	return true
}

// credentialHeaders returns the request's Authorization, Cookie,
// traceparent, tracestate and method override headers (Envoy sends header
// names in lower case, and joins repeated headers with ","; or, with
// encode_raw_headers, lists each in header_map), in pooled checkHeaders
// the caller releases when done with them.
func credentialHeaders(hr *authv3.AttributeContext_HttpRequest) *checkHeaders {
	c := credentialPool.Get().(*checkHeaders)
	if hm := hr.GetHeaderMap(); hm != nil {
		for _, hv := range hm.GetHeaders() {
			v := hv.GetValue()
			if raw := hv.GetRawValue(); len(raw) > 0 {
				v = string(raw)
			}
			c.add(hv.GetKey(), v)
		}
	}
	for k, v := range hr.GetHeaders() {
		c.add(k, v)
	}
	return c
}

// maxInlineHeaders is how many claim headers an allowed Check's answer
// holds without a further allocation: the three of the default mapping
// (subject, scopes, issuer), in 768 bytes.
const maxInlineHeaders = 3

// okAnswer is an allowed Check's answer, its messages allocated at once.
type okAnswer struct {
	resp authv3.CheckResponse
	wrap authv3.CheckResponse_OkResponse
	ok   authv3.OkHttpResponse
	opts [maxInlineHeaders]corev3.HeaderValueOption
	vals [maxInlineHeaders]corev3.HeaderValue
	set  [maxInlineHeaders]*corev3.HeaderValueOption
}

// okStatus is every allowed Check's status: never changed, so shared by
// every answer (gRPC only reads it to marshal it).
var okStatus = &rpcstatus.Status{Code: int32(codes.OK)}

// allow sets the claim headers the token fills and removes every other one
// and every '_' spelling of each.
func (s *Service) allow(d *gateway.Decider, dec *gateway.Decision) *authv3.CheckResponse {
	c := s.claimNames(d)
	a := &okAnswer{}
	a.resp.Status = okStatus
	a.resp.HttpResponse = &a.wrap
	a.wrap.OkResponse = &a.ok
	ok := &a.ok
	ok.Headers = a.set[:0]
	var missing []string // lower case, in the decider's order
	for i, name := range d.ClaimHeaders() {
		v := gateway.HeaderValue(dec.Result, name)
		if v == "" {
			if missing == nil {
				missing = make([]string, 0, len(c.names)+len(c.underscored))
			}
			missing = append(missing, c.names[i])
			continue
		}
		if n := len(ok.Headers); n < maxInlineHeaders {
			a.vals[n] = corev3.HeaderValue{Key: c.names[i], Value: v}
			a.opts[n] = corev3.HeaderValueOption{Header: &a.vals[n], AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
			ok.Headers = append(ok.Headers, &a.opts[n])
		} else {
			ok.Headers = append(ok.Headers, header(c.names[i], v))
		}
	}
	if len(missing) == 0 {
		// Every claim header set: what is removed is the same for every
		// answer, shared (read only, full so that no append can write to it).
		ok.HeadersToRemove = c.underscored[:len(c.underscored):len(c.underscored)]
	} else {
		ok.HeadersToRemove = append(missing, c.underscored...)
	}
	return &a.resp
}

// refuse counts and returns a refusal the Service makes before any
// decision.
func (s *Service) refuse(status int, code, reason, description string) *authv3.CheckResponse {
	if s.metrics != nil {
		s.metrics.Deny(reason)
	}
	return denied(&gateway.Decision{Status: status, Error: code, Reason: reason, Description: description})
}

// denied is the answer Envoy sends the client for a refused request.
func denied(dec *gateway.Decision) *authv3.CheckResponse {
	hs := []*corev3.HeaderValueOption{header("content-type", "application/json"), header("cache-control", "no-store"),
		header(ReasonHeader, dec.Reason)}
	if dec.Challenge != "" {
		hs = append(hs, header("www-authenticate", dec.Challenge))
	}
	code := codes.PermissionDenied
	switch dec.Status {
	case http.StatusUnauthorized:
		code = codes.Unauthenticated
	case http.StatusServiceUnavailable:
		code = codes.Unavailable
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(code), Message: dec.Reason},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode(dec.Status)}, Headers: hs, Body: dec.Body()}},
	}
}

// header is a header Envoy sets, replacing every copy the request or
// response already has.
func header(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}
