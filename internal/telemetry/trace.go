package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of keygate's spans.
const TracerName = "github.com/keygate/keygate"

// Span names.
const (
	SpanAuth       = "keygate.auth"        // a forward-auth decision
	SpanProxy      = "keygate.proxy"       // a reverse-proxy request, upstream included
	SpanUpstream   = "keygate.upstream"    // the proxy's request to the upstream
	SpanExtAuthz   = "keygate.ext_authz"   // an Envoy ext_authz Check
	SpanVerify     = "keygate.verify"      // a full verification (cache miss)
	SpanCache      = "keygate.cache"       // the verified-token cache lookup
	SpanKeyRefetch = "keygate.key.refetch" // a key refetch for an unknown kid
	SpanJWKSFetch  = "keygate.jwks.fetch"  // one fetch of a remote JWKS
	SpanTokenPref  = "keygate.token."      // + endpoint: token, revoke, introspect, login
)

// Attribute keys.
const (
	AttrFrontend = attribute.Key("keygate.frontend")
	AttrDecision = attribute.Key("keygate.decision") // allow, deny
	AttrReason   = attribute.Key("keygate.reason")
	AttrIssuer   = attribute.Key("keygate.issuer")
	AttrKeyID    = attribute.Key("keygate.kid")
	AttrAlg      = attribute.Key("keygate.alg")
	AttrCacheHit = attribute.Key("keygate.cache.hit")
	AttrGrant    = attribute.Key("keygate.grant")
	AttrResult   = attribute.Key("keygate.result")
	AttrMethod   = attribute.Key("http.request.method")
	AttrStatus   = attribute.Key("http.response.status_code")
)

// Tracer starts keygate's root spans. A nil *Tracer is tracing off.
//
// keygate's spans are started through a *Tracer held by each front end and
// background job that begins a trace (forward-auth, the proxy, ext_authz,
// the token service, JWKS refreshes); a nil *Tracer starts nothing and
// costs nothing, so that the request path allocates nothing with tracing
// off. Code below them (verification, the cache, key refetches, store
// calls, Redis) starts child spans with StartChild, which uses the parent
// span's own provider and does nothing unless that span is recording: it
// needs no tracer of its own. It is told to trace, or wrapped, only when
// tracing is on (verify.Config.Traced, node.Config.Traced), so that off it
// does not even look for a span.
//
// Attributes name what was decided and by which key, never what a token
// says: front end, decision, reason, issuer, kid, alg, cache hit. No
// token, claim value other than the issuer, key or secret is ever set on
// a span, an event or a status.
type Tracer struct {
	tr     trace.Tracer
	prop   propagation.TraceContext
	server []trace.SpanStartOption // built once: an option per call would allocate
}

// NewTracer returns a Tracer on tp; nil for a nil tp.
func NewTracer(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		return nil
	}
	return &Tracer{tr: tp.Tracer(TracerName), server: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}}
}

// On reports whether t starts spans.
func (t *Tracer) On() bool { return t != nil }

// StartServer starts a server span named name as a child of the W3C trace
// context in h (traceparent, tracestate), if h carries a valid one: a
// malformed or missing traceparent is ignored, and the span begins a trace
// of its own.
func (t *Tracer) StartServer(ctx context.Context, name string, h http.Header) (context.Context, trace.Span) {
	if len(h["Traceparent"]) > 0 {
		ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(h))
	}
	return t.tr.Start(ctx, name, t.server...)
}

// Start starts an internal span named name, a child of ctx's span if any:
// for background work such as a JWKS refresh.
func (t *Tracer) Start(ctx context.Context, name string) (context.Context, trace.Span) {
	return t.tr.Start(ctx, name)
}

// StartChild starts a span named name under ctx's span when that span is
// recording, with the provider that started it; otherwise it returns ctx
// and ctx's own (non-recording) span, whose End does nothing. Guard
// attributes with span.IsRecording(), so that tracing off builds none.
func StartChild(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(TracerName).Start(ctx, name, trace.WithSpanKind(kind))
}

// Inject replaces the W3C trace context in h with ctx's span: what the
// proxy sends upstream, so that the upstream's spans are children of
// keygate's. The client's traceparent and tracestate are removed first,
// so that a malformed one, which StartServer ignored, is not passed on.
func Inject(ctx context.Context, h http.Header) {
	delete(h, "Traceparent")
	delete(h, "Tracestate")
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}

// Fail marks span as failed with a fixed reason (never an error's text,
// which may quote input).
func Fail(span trace.Span, reason string) {
	span.SetStatus(codes.Error, reason)
}

// TraceID is the trace id of ctx's span when it is sampled, for an
// exemplar; "" otherwise.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}
