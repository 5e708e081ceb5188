package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/keygate/keygate/internal/telemetry"
)

// BenchmarkForwardAuth is one forward-auth decision as nginx asks for it
// (X-Original-URI/-Method, X-Forwarded-Host) against route rules, for a
// token the verified-token cache already holds: the path every repeated
// request takes, so forwarding-header checks and path canonicalisation
// show here.
func BenchmarkForwardAuth(b *testing.B) {
	benchForwardAuth(b, []Route{
		{PathPrefix: "/public", Anonymous: true},
		{PathPrefix: "/admin", Scopes: []string{"admin"}},
		{PathPrefix: "/"},
	})
}

// BenchmarkForwardAuthMethodRules is BenchmarkForwardAuth under rules that
// tell methods apart, where every request's headers are looked through for
// method overrides.
func BenchmarkForwardAuthMethodRules(b *testing.B) {
	benchForwardAuth(b, []Route{
		{PathPrefix: "/public", Anonymous: true},
		{PathPrefix: "/orders", Methods: []string{"POST", "PUT", "PATCH", "DELETE"}, Scopes: []string{"write"}},
		{PathPrefix: "/admin", Scopes: []string{"admin"}},
		{PathPrefix: "/"},
	})
}

// benchForwardAuth measures a cached /auth hit behind nginx's headers.
func benchForwardAuth(b *testing.B, routes []Route) {
	f := newFixture(b, routes, "")
	tok := sign(b, f.signerA, nil)
	req := httptest.NewRequest(http.MethodGet, "/auth", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Original-Uri", "/orders/42?expand=items")
	req.Header.Set("X-Original-Method", "GET")
	req.Header.Set("X-Forwarded-Host", "api.example.com")
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	req.Header.Set("X-Forwarded-Proto", "https")
	req.Header.Set("User-Agent", "Mozilla/5.0")
	req.Header.Set("Accept", "application/json")
	w := &discardWriter{h: http.Header{}}
	f.handler.ServeHTTP(w, req)
	if w.code != http.StatusOK {
		b.Fatalf("status %d", w.code)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		clear(w.h)
		f.handler.ServeHTTP(w, req)
	}
}

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// BenchmarkForwardAuthTracing is BenchmarkForwardAuth's cached decision
// with tracing off, on with every request's trace dropped by the sampler
// (ratio 0), and on with every one sampled (spans batched to an exporter
// that discards them): what tracing costs the hot path.
func BenchmarkForwardAuthTracing(b *testing.B) {
	routes := []Route{
		{PathPrefix: "/public", Anonymous: true},
		{PathPrefix: "/admin", Scopes: []string{"admin"}},
		{PathPrefix: "/"},
	}
	signer := newSigner(b, "a1")
	tok := sign(b, signer, nil)
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler // nil: tracing off
	}{
		{"off", nil},
		{"unsampled", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))},
		{"sampled", sdktrace.ParentBased(sdktrace.AlwaysSample())},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var tracer *telemetry.Tracer
			if tc.sampler != nil {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}), sdktrace.WithSampler(tc.sampler))
				b.Cleanup(func() { tp.Shutdown(context.Background()) })
				tracer = telemetry.NewTracer(tp)
			}
			h, err := NewForwardAuth(ForwardAuthConfig{Verifier: tracedPipeline(b, signer, tracer != nil), Routes: routes,
				Headers: []string{"X-Auth-Subject", "X-Auth-Scopes", "X-Auth-Tenant", "X-Auth-Roles"}, Tracer: tracer})
			if err != nil {
				b.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodGet, "/auth", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("X-Original-Uri", "/orders/42?expand=items")
			req.Header.Set("X-Original-Method", "GET")
			req.Header.Set("X-Forwarded-Host", "api.example.com")
			w := &discardWriter{h: http.Header{}}
			h.ServeHTTP(w, req)
			if w.code != http.StatusOK {
				b.Fatalf("status %d", w.code)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				clear(w.h)
				h.ServeHTTP(w, req)
			}
		})
	}
}

// discardExporter exports spans nowhere.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }
