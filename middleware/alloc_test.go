package middleware_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/keygate/keygate/jose"
	"github.com/keygate/keygate/middleware"
)

// allocEnv is a Middleware over one fixed ES256 key and a request carrying
// a token it accepts, verified once so that it is in the cache.
func allocEnv(tb testing.TB) (*middleware.Middleware, *http.Request) {
	tb.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	s, err := jose.NewSigner(jose.ES256, "k1", k)
	if err != nil {
		tb.Fatal(err)
	}
	mw, err := middleware.New(context.Background(), middleware.Config{Issuers: []middleware.Issuer{{
		Issuer: "fixed", Keys: jose.NewKeySet(s.Key()), Algorithms: []jose.Alg{jose.ES256}, Audiences: []string{"orders"}}}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(mw.Close)
	tok, err := s.SignClaims(map[string]any{"iss": "fixed", "sub": "alice", "aud": "orders",
		"exp": time.Now().Add(time.Hour).Unix(), "scope": "orders:read orders:write"})
	if err != nil {
		tb.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/orders", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	if o := mw.Check(r.Context(), r.Header); !o.Allowed() {
		tb.Fatalf("Check: %d %s", o.Status, o.Reason)
	}
	return mw, r
}

// TestCheckAllocations: Check of a cached token allocates nothing; the
// net/http middleware adds only the request context carrying the identity.
func TestCheckAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	mw, r := allocEnv(t)
	if a := testing.AllocsPerRun(1000, func() {
		if o := mw.Check(r.Context(), r.Header, "orders:write"); !o.Allowed() {
			t.Fatal(o.Reason)
		}
	}); a != 0 {
		t.Errorf("Check of a cached token allocates %v times, want 0", a)
	}
	h := mw.Require("orders:write")(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	// context.WithValue and Request.WithContext.
	if a := testing.AllocsPerRun(1000, func() { h.ServeHTTP(nil, r) }); a > 2 {
		t.Errorf("Require's handler allocates %v times on a cached token, want at most 2", a)
	}
}

func BenchmarkCheck(b *testing.B) {
	mw, r := allocEnv(b)
	b.ReportAllocs()
	for b.Loop() {
		mw.Check(r.Context(), r.Header, "orders:write")
	}
}

func BenchmarkRequire(b *testing.B) {
	mw, r := allocEnv(b)
	h := mw.Require("orders:write")(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(nil, r)
	}
}
