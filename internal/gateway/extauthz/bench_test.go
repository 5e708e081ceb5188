package extauthz

import (
	"testing"
)

// BenchmarkCheck is one Check as Envoy asks it, for a token the
// verified-token cache already holds, against route rules: the path every
// repeated request takes (the gRPC transport aside).
func BenchmarkCheck(b *testing.B) {
	f := newFixture(b)
	req := checkRequest("GET", "api.example.com", "/orders/42?expand=items",
		map[string]string{"authorization": "Bearer " + f.sign(b, "ES256", nil)})
	if resp, _ := f.svc.Check(b.Context(), req); resp.GetOkResponse() == nil {
		b.Fatalf("not allowed: %v", resp)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f.svc.Check(b.Context(), req)
	}
}

// TestCheckAllocs bounds the allocations of an allowed Check on a cached
// token: the response's messages (the CheckResponse, its status, its
// OkHttpResponse and the wrapper, the two header slices, a
// HeaderValueOption and a HeaderValue for each of the 3 claim headers set)
// and the credential headers (a map and a slice): 15, and the decision
// itself none.
func TestCheckAllocs(t *testing.T) {
	f := newFixture(t)
	req := checkRequest("GET", "api.example.com", "/orders/42?expand=items",
		map[string]string{"authorization": "Bearer " + f.sign(t, "ES256", nil)})
	f.svc.Check(t.Context(), req)
	const max = 15
	if n := testing.AllocsPerRun(100, func() { f.svc.Check(t.Context(), req) }); n > max {
		t.Errorf("an allowed Check allocates %v times, want at most %d", n, max)
	}
}
