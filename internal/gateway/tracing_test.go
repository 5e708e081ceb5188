package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/verify"
	"github.com/keygate/keygate/internal/verify/verifykeys"
	"github.com/keygate/keygate/jose"
)

// traced is a forward-auth handler and a proxy on one pipeline, traced
// into an in-memory exporter.
type traced struct {
	signer   *jose.Signer
	exp      *tracetest.InMemoryExporter
	auth     *ForwardAuth
	proxy    *Proxy
	upstream *upstreamSeen
}

// upstreamSeen records the trace headers the upstream received.
type upstreamSeen struct {
	mu          sync.Mutex
	traceparent []string
	tracestate  []string
}

func (u *upstreamSeen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.traceparent, u.tracestate = r.Header["Traceparent"], r.Header["Tracestate"]
	u.mu.Unlock()
	w.WriteHeader(http.StatusTeapot)
}

func (u *upstreamSeen) seen() (tp, ts []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.traceparent, u.tracestate
}

// newTraced builds the fixture with tracing on under sampler (nil: off).
func newTraced(t testing.TB, sampler sdktrace.Sampler) *traced {
	t.Helper()
	f := &traced{signer: newSigner(t, "a1"), exp: tracetest.NewInMemoryExporter(), upstream: &upstreamSeen{}}
	var tracer *telemetry.Tracer
	if sampler != nil {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(f.exp), sdktrace.WithSampler(sampler))
		t.Cleanup(func() { tp.Shutdown(context.Background()) })
		tracer = telemetry.NewTracer(tp)
	}
	p := tracedPipeline(t, f.signer, sampler != nil)
	var err error
	if f.auth, err = NewForwardAuth(ForwardAuthConfig{Verifier: p, Headers: []string{"X-Auth-Subject"}, Tracer: tracer}); err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(f.upstream)
	t.Cleanup(up.Close)
	if f.proxy, err = NewProxy(ProxyConfig{Verifier: p, Routes: []Route{{PathPrefix: "/", Upstream: up.URL}},
		Headers: []string{"X-Auth-Subject"}, Tracer: tracer}); err != nil {
		t.Fatal(err)
	}
	return f
}

// tracedPipeline is a pipeline trusting signer's key for issuer A, mapping
// X-Auth-Subject, traced when traced is set.
func tracedPipeline(t testing.TB, signer *jose.Signer, traced bool) *verify.Pipeline {
	t.Helper()
	p, err := verify.New(verify.Config{
		Policies: []verify.Policy{{Issuer: issA, Keys: verifykeys.NewStatic(jose.NewKeySet(signer.Key())),
			Algorithms: []jose.Alg{jose.ES256}, Audiences: []string{"api"},
			Headers: []verify.HeaderMapping{{Header: "X-Auth-Subject", Claim: "sub"}}}},
		Now:    func() time.Time { return testNow },
		Traced: traced,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// span is what a test asserts of an exported span.
type span struct {
	name   string
	parent string // the parent's name; "" for a root, "remote" for a remote parent
	attrs  map[attribute.Key]string
}

// spans returns the exported spans in end order, and empties the exporter.
func (f *traced) spans(t *testing.T) []span {
	t.Helper()
	stubs := f.exp.GetSpans()
	f.exp.Reset()
	names := map[trace.SpanID]string{}
	for _, s := range stubs {
		names[s.SpanContext.SpanID()] = s.Name
	}
	var out []span
	for _, s := range stubs {
		sp := span{name: s.Name, attrs: map[attribute.Key]string{}}
		switch {
		case !s.Parent.IsValid():
		case s.Parent.IsRemote():
			sp.parent = "remote"
		default:
			sp.parent = names[s.Parent.SpanID()]
		}
		for _, kv := range s.Attributes {
			sp.attrs[kv.Key] = kv.Value.Emit()
		}
		out = append(out, sp)
	}
	return out
}

// TestTracingForwardAuth: each /auth decision is a keygate.auth server
// span with the decision's attributes, and the pipeline's cache lookup
// and verification are its children; a valid traceparent is its parent,
// a malformed one is ignored.
func TestTracingForwardAuth(t *testing.T) {
	f := newTraced(t, sdktrace.AlwaysSample())
	valid := sign(t, f.signer, nil)
	expired := sign(t, f.signer, map[string]any{"exp": testNow.Add(-time.Hour).Unix()})
	const parentTrace, parentSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	for _, tc := range []struct {
		name        string
		token       string
		traceparent string
		status      int
		want        []span // in end order; attrs listed are required, others allowed
	}{
		{"first use of a valid token verifies it", valid, "", http.StatusOK, []span{
			{name: telemetry.SpanCache, parent: telemetry.SpanAuth, attrs: map[attribute.Key]string{telemetry.AttrCacheHit: "false"}},
			{name: telemetry.SpanVerify, parent: telemetry.SpanAuth, attrs: map[attribute.Key]string{
				telemetry.AttrIssuer: issA, telemetry.AttrKeyID: "a1", telemetry.AttrAlg: "ES256"}},
			{name: telemetry.SpanAuth, attrs: map[attribute.Key]string{telemetry.AttrFrontend: telemetry.FrontForwardAuth,
				telemetry.AttrDecision: "allow", telemetry.AttrStatus: "200", telemetry.AttrIssuer: issA,
				telemetry.AttrKeyID: "a1", telemetry.AttrAlg: "ES256", telemetry.AttrMethod: "GET"}},
		}},
		{"a repeated token is a cache hit", valid, "", http.StatusOK, []span{
			{name: telemetry.SpanCache, parent: telemetry.SpanAuth, attrs: map[attribute.Key]string{telemetry.AttrCacheHit: "true",
				telemetry.AttrIssuer: issA}},
			{name: telemetry.SpanAuth, attrs: map[attribute.Key]string{telemetry.AttrDecision: "allow"}},
		}},
		{"an expired token is refused with its reason", expired, "", http.StatusUnauthorized, []span{
			{name: telemetry.SpanCache, parent: telemetry.SpanAuth, attrs: map[attribute.Key]string{telemetry.AttrCacheHit: "false"}},
			{name: telemetry.SpanVerify, parent: telemetry.SpanAuth, attrs: map[attribute.Key]string{telemetry.AttrReason: "expired"}},
			{name: telemetry.SpanAuth, attrs: map[attribute.Key]string{telemetry.AttrDecision: "deny",
				telemetry.AttrReason: "expired", telemetry.AttrStatus: "401"}},
		}},
		{"no token: no verification", "", "", http.StatusUnauthorized, []span{
			{name: telemetry.SpanAuth, attrs: map[attribute.Key]string{telemetry.AttrDecision: "deny", telemetry.AttrReason: "missing_token"}},
		}},
		{"a valid traceparent is the parent", valid, "00-" + parentTrace + "-" + parentSpan + "-01", http.StatusOK, []span{
			{name: telemetry.SpanCache, parent: telemetry.SpanAuth},
			{name: telemetry.SpanAuth, parent: "remote"},
		}},
		{"a malformed traceparent is ignored", valid, "00-" + parentTrace + "-zzzz-01", http.StatusOK, []span{
			{name: telemetry.SpanCache, parent: telemetry.SpanAuth},
			{name: telemetry.SpanAuth},
		}},
		{"an all-zero trace id is ignored", valid, "00-00000000000000000000000000000000-" + parentSpan + "-01", http.StatusOK, []span{
			{name: telemetry.SpanCache, parent: telemetry.SpanAuth},
			{name: telemetry.SpanAuth},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/auth", nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			if tc.traceparent != "" {
				req.Header.Set("Traceparent", tc.traceparent)
			}
			w := httptest.NewRecorder()
			f.auth.ServeHTTP(w, req)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d", w.Code, tc.status)
			}
			stubs := f.exp.GetSpans()
			got := f.spans(t)
			checkSpans(t, got, tc.want)
			if tc.traceparent != "" {
				root := stubs[len(stubs)-1]
				fromParent := root.SpanContext.TraceID().String() == parentTrace
				if wantParent := tc.want[len(tc.want)-1].parent == "remote"; fromParent != wantParent {
					t.Errorf("trace id %s, from the traceparent: %v, want %v", root.SpanContext.TraceID(), fromParent, wantParent)
				}
				if fromParent && root.Parent.SpanID().String() != parentSpan {
					t.Errorf("parent span %s, want %s", root.Parent.SpanID(), parentSpan)
				}
			}
		})
	}
}

func checkSpans(t *testing.T, got, want []span) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("spans %v, want %v", got, want)
	}
	for i, w := range want {
		g := got[i]
		if g.name != w.name || g.parent != w.parent {
			t.Errorf("span %d: %s under %q, want %s under %q", i, g.name, g.parent, w.name, w.parent)
		}
		for k, v := range w.attrs {
			if g.attrs[k] != v {
				t.Errorf("%s: %s = %q, want %q", g.name, k, g.attrs[k], v)
			}
		}
	}
}

// TestTracingProxy: a proxied request is a keygate.proxy span with a
// keygate.upstream child, and the upstream receives a traceparent naming
// that child in the client's trace; a client's malformed traceparent and
// its tracestate are not passed on. With tracing off, the client's trace
// headers pass through untouched.
func TestTracingProxy(t *testing.T) {
	const parentTrace = "0af7651916cd43dd8448eb211c80319c"
	for _, tc := range []struct {
		name            string
		on              bool
		traceparent     string
		tracestate      string
		wantSameTrace   bool
		wantPassThrough bool
	}{
		{name: "a valid traceparent is continued", on: true, traceparent: "00-" + parentTrace + "-b7ad6b7169203331-01",
			tracestate: "vendor=x", wantSameTrace: true},
		{name: "a malformed traceparent starts a new trace", on: true, traceparent: "00-" + parentTrace + "-b7ad6b71692033-01",
			tracestate: "vendor=x"},
		{name: "no traceparent starts a new trace", on: true},
		{name: "tracing off passes the headers on", traceparent: "00-garbage", tracestate: "vendor=x", wantPassThrough: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sampler sdktrace.Sampler
			if tc.on {
				sampler = sdktrace.AlwaysSample()
			}
			f := newTraced(t, sampler)
			req := httptest.NewRequest(http.MethodGet, "/orders/1", nil)
			req.Header.Set("Authorization", "Bearer "+sign(t, f.signer, nil))
			if tc.traceparent != "" {
				req.Header.Set("Traceparent", tc.traceparent)
			}
			if tc.tracestate != "" {
				req.Header.Set("Tracestate", tc.tracestate)
			}
			w := httptest.NewRecorder()
			f.proxy.ServeHTTP(w, req)
			if w.Code != http.StatusTeapot {
				t.Fatalf("status %d, want the upstream's 418", w.Code)
			}
			tp, ts := f.upstream.seen()
			if tc.wantPassThrough {
				if len(tp) != 1 || tp[0] != tc.traceparent || len(ts) != 1 || ts[0] != tc.tracestate {
					t.Errorf("upstream got traceparent %q tracestate %q, want the client's", tp, ts)
				}
				return
			}
			stubs := f.exp.GetSpans()
			checkSpans(t, f.spans(t), []span{
				{name: telemetry.SpanCache, parent: telemetry.SpanProxy},
				{name: telemetry.SpanVerify, parent: telemetry.SpanProxy},
				{name: telemetry.SpanUpstream, parent: telemetry.SpanProxy, attrs: map[attribute.Key]string{telemetry.AttrStatus: "418"}},
				{name: telemetry.SpanProxy, parent: map[bool]string{true: "remote"}[tc.wantSameTrace],
					attrs: map[attribute.Key]string{telemetry.AttrFrontend: telemetry.FrontProxy, telemetry.AttrDecision: "allow"}},
			})
			up := stubs[2].SpanContext
			want := fmt.Sprintf("00-%s-%s-01", up.TraceID(), up.SpanID())
			if len(tp) != 1 || tp[0] != want {
				t.Errorf("upstream got traceparent %q, want %q (keygate.upstream's)", tp, want)
			}
			if (up.TraceID().String() == parentTrace) != tc.wantSameTrace {
				t.Errorf("trace %s, continued from the client's: want %v", up.TraceID(), tc.wantSameTrace)
			}
			if wantTS := map[bool]string{true: tc.tracestate}[tc.wantSameTrace]; strings.Join(ts, ",") != wantTS {
				t.Errorf("upstream got tracestate %q, want %q", ts, wantTS)
			}
		})
	}
}

// TestTracingHoldsNoToken: no span name, attribute, event or status of any
// decision, allowed or refused, holds a token or any 16 characters of one.
func TestTracingHoldsNoToken(t *testing.T) {
	f := newTraced(t, sdktrace.AlwaysSample())
	other := newSigner(t, "a1") // the same kid, another key: a forgery
	tokens := []string{
		sign(t, f.signer, nil),
		sign(t, f.signer, map[string]any{"exp": testNow.Add(-time.Hour).Unix()}),
		sign(t, f.signer, map[string]any{"aud": "elsewhere"}),
		sign(t, other, nil),
		sign(t, f.signer, map[string]any{"iss": "https://unknown.example.com/"}),
		strings.Repeat("eyJhbGciOiJFUzI1NiJ9", 5) + ".e30.c2ln",
	}
	for _, tok := range tokens {
		for _, h := range []http.Handler{f.auth, f.proxy} {
			for range 2 { // the second time from the cache, where it verified
				req := httptest.NewRequest(http.MethodGet, "/x", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Traceparent", "00-"+tok[:32]+"-"+tok[:16]+"-01") // a token where a trace id goes
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
		}
	}
	windows := map[string]bool{}
	for _, tok := range tokens {
		for i := 0; i+16 <= len(tok); i++ {
			windows[tok[i:i+16]] = true
		}
	}
	leaks := func(where, s string) {
		for i := 0; i+16 <= len(s); i++ {
			if windows[s[i:i+16]] {
				t.Errorf("%s holds part of a token: %q", where, s)
				return
			}
		}
	}
	stubs := f.exp.GetSpans()
	if len(stubs) == 0 {
		t.Fatal("no spans")
	}
	for _, s := range stubs {
		leaks("span name", s.Name)
		leaks(s.Name+" status", s.Status.Description)
		for _, kv := range s.Attributes {
			leaks(s.Name+" "+string(kv.Key), kv.Value.Emit())
		}
		for _, ev := range s.Events {
			leaks(s.Name+" event", ev.Name)
			for _, kv := range ev.Attributes {
				leaks(s.Name+" event "+string(kv.Key), kv.Value.Emit())
			}
		}
		leaks(s.Name+" tracestate", s.SpanContext.TraceState().String())
	}
}

// TestForwardAuthAllocations: with tracing off, a forward-auth decision on
// a cached token allocates nothing, claim headers included (their values
// are made once, when the token is verified, and shared by its requests).
func TestForwardAuthAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	f := newTraced(t, nil)
	for _, tc := range []struct {
		name    string
		headers []string
		want    float64
	}{
		{"no claim headers", nil, 0},
		{"two claim headers", []string{"X-Auth-Subject", "X-Auth-Other"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := NewForwardAuth(ForwardAuthConfig{Verifier: f.auth.verifier, Headers: tc.headers})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodGet, "/auth", nil)
			req.Header.Set("Authorization", "Bearer "+sign(t, f.signer, nil))
			w := &discardWriter{h: http.Header{}}
			h.ServeHTTP(w, req)
			if w.code != http.StatusOK {
				t.Fatalf("status %d", w.code)
			}
			if a := testing.AllocsPerRun(1000, func() {
				clear(w.h)
				h.ServeHTTP(w, req)
			}); a != tc.want {
				t.Errorf("a cached decision with tracing off allocates %v times, want %v", a, tc.want)
			}
		})
	}
}
