package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkForwardAuth is one forward-auth decision as nginx asks for it
// (X-Original-URI/-Method, X-Forwarded-Host) against route rules, for a
// token the verified-token cache already holds: the path every repeated
// request takes, so forwarding-header checks and path canonicalisation
// show here.
func BenchmarkForwardAuth(b *testing.B) {
	f := newFixture(b, []Route{
		{PathPrefix: "/public", Anonymous: true},
		{PathPrefix: "/admin", Scopes: []string{"admin"}},
		{PathPrefix: "/"},
	}, "")
	tok := sign(b, f.signerA, nil)
	req := httptest.NewRequest(http.MethodGet, "/auth", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Original-Uri", "/orders/42?expand=items")
	req.Header.Set("X-Original-Method", "GET")
	req.Header.Set("X-Forwarded-Host", "api.example.com")
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
