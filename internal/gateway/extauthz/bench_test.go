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
