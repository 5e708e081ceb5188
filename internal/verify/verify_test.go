package verify

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/internal/verify/verifykeys"
	"github.com/keygate/keygate/jose"
)

const (
	issA = "https://a.example"
	issB = "https://b.example"
)

// env is two tenants: A (ES256 and RS256, any-of audiences, scope "read")
// and B (ES256 only, all-of audiences, typ at+jwt, sub and jti required).
type env struct {
	p          *Pipeline
	clk        *clock
	rev        *revoke.Memory
	srcA, srcB *fakeSource
	a, aRSA, b *jose.Signer
	aClaims    claims
	bClaims    claims
}

func newEnv(t testing.TB, mod func(*Config)) *env {
	t.Helper()
	e := &env{clk: newClock(), rev: revoke.NewMemory()}
	e.a = ecSigner(t, 0, "a1")
	e.aRSA = rsaSigner(t, "a-rsa")
	e.b = ecSigner(t, 1, "b1").WithType("at+jwt")
	e.srcA = newSource(e.a.Key(), e.aRSA.Key())
	e.srcB = newSource(e.b.Key())
	now := t0.Unix()
	e.aClaims = claims{"iss": issA, "sub": "alice", "aud": "api", "exp": now + 3600, "iat": now,
		"jti": "a-1", "scope": "read write"}
	e.bClaims = claims{"iss": issB, "sub": "bob", "aud": []string{"api", "billing"}, "exp": now + 3600,
		"iat": now, "jti": "b-1"}
	cfg := Config{
		Policies: []Policy{
			{Issuer: issA, Keys: e.srcA, Algorithms: []jose.Alg{jose.ES256, jose.RS256},
				Audiences: []string{"api", "api2"}, Scopes: []string{"read"}},
			{Issuer: issB, Keys: e.srcB, Algorithms: []jose.Alg{jose.ES256},
				Audiences: []string{"api", "billing"}, AllAudiences: true,
				Require: []string{"exp", "sub", "jti"}, Type: "at+jwt"},
		},
		Revocation: e.rev,
		Now:        e.clk.Now,
	}
	if mod != nil {
		mod(&cfg)
	}
	e.p = mustNew(t, cfg)
	return e
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// segments splits a compact token.
func segments(tok string) (h, p, s string) {
	parts := strings.Split(tok, ".")
	return parts[0], parts[1], parts[2]
}

func TestVerifyReasons(t *testing.T) {
	ctx := context.Background()
	now := t0.Unix()
	tests := []struct {
		name  string
		token func(t *testing.T, e *env) string
		want  string // the refusal reason; "" for accepted
	}{
		{"accepted ES256", func(t *testing.T, e *env) string { return mint(t, e.a, e.aClaims) }, ""},
		{"accepted RS256", func(t *testing.T, e *env) string { return mint(t, e.aRSA, e.aClaims) }, ""},
		{"accepted tenant B", func(t *testing.T, e *env) string { return mint(t, e.b, e.bClaims) }, ""},

		{"malformed: one segment", func(*testing.T, *env) string { return "abc" }, "malformed"},
		{"malformed: empty", func(*testing.T, *env) string { return "" }, "malformed"},
		{"malformed: bad base64", func(*testing.T, *env) string { return "a*b.c.d" }, "malformed"},
		{"malformed: payload not JSON", func(t *testing.T, e *env) string {
			h, _, s := segments(mint(t, e.a, e.aClaims))
			return h + "." + b64("nope") + "." + s
		}, "malformed"},
		{"too_large", func(*testing.T, *env) string {
			return strings.Repeat("a", jose.DefaultMaxTokenSize+1)
		}, "too_large"},

		{"unsupported_alg: none", func(t *testing.T, e *env) string {
			_, p, _ := segments(mint(t, e.a, e.aClaims))
			return b64(`{"alg":"none"}`) + "." + p + "."
		}, "unsupported_alg"},
		{"unsupported_alg: HS256 not allowed for A", func(t *testing.T, e *env) string {
			return mint(t, hmacSigner(t, "a1", strings.Repeat("k", 32)), e.aClaims)
		}, "unsupported_alg"},
		{"unsupported_alg: RS256 not allowed for B", func(t *testing.T, e *env) string {
			return mint(t, rsaSigner(t, "b1").WithType("at+jwt"), e.bClaims)
		}, "unsupported_alg"},

		{"unknown_kid: kid not in A's set", func(t *testing.T, e *env) string {
			return mint(t, ecSigner(t, 2, "a-unknown"), e.aClaims)
		}, "unknown_kid"},
		{"bad_signature: other key under A's kid", func(t *testing.T, e *env) string {
			return mint(t, ecSigner(t, 2, "a1"), e.aClaims)
		}, "bad_signature"},
		{"bad_signature: payload swapped", func(t *testing.T, e *env) string {
			h, _, s := segments(mint(t, e.a, e.aClaims))
			_, p, _ := segments(mint(t, e.a, e.aClaims.with("sub", "mallory")))
			return h + "." + p + "." + s
		}, "bad_signature"},

		{"expired beyond leeway", func(t *testing.T, e *env) string {
			return mint(t, e.a, e.aClaims.with("exp", now-61))
		}, "expired"},
		{"accepted: expired within leeway", func(t *testing.T, e *env) string {
			return mint(t, e.a, e.aClaims.with("exp", now-30))
		}, ""},
		{"not_yet_valid: nbf", func(t *testing.T, e *env) string {
			return mint(t, e.a, e.aClaims.with("nbf", now+300))
		}, "not_yet_valid"},
		{"not_yet_valid: iat in the future", func(t *testing.T, e *env) string {
			return mint(t, e.a, e.aClaims.with("iat", now+300))
		}, "not_yet_valid"},

		{"wrong_issuer: unknown iss", func(t *testing.T, e *env) string {
			return mint(t, e.a, e.aClaims.with("iss", "https://evil.example"))
		}, "wrong_issuer"},
		{"wrong_issuer: iss differs in case", func(t *testing.T, e *env) string {
			return mint(t, e.a, e.aClaims.with("iss", "https://A.example"))
		}, "wrong_issuer"},
		{"missing_claim: no iss", func(t *testing.T, e *env) string {
			return mint(t, e.a, e.aClaims.with("iss", nil))
		}, "missing_claim"},

		{"wrong_audience: any-of, none match", func(t *testing.T, e *env) string {
			return mint(t, e.a, e.aClaims.with("aud", []string{"other", "x"}))
		}, "wrong_audience"},
		{"accepted: any-of, one matches", func(t *testing.T, e *env) string {
			return mint(t, e.a, e.aClaims.with("aud", []string{"other", "api2"}))
		}, ""},
		{"wrong_audience: all-of, one missing", func(t *testing.T, e *env) string {
			return mint(t, e.b, e.bClaims.with("aud", []string{"api"}))
		}, "wrong_audience"},
		{"accepted: all-of, a superset", func(t *testing.T, e *env) string {
			return mint(t, e.b, e.bClaims.with("aud", []string{"x", "billing", "api"}))
		}, ""},
		{"missing_claim: no aud", func(t *testing.T, e *env) string {
			return mint(t, e.a, e.aClaims.with("aud", nil))
		}, "missing_claim"},

		{"missing_claim: no exp (default Require)", func(t *testing.T, e *env) string {
			return mint(t, e.a, e.aClaims.with("exp", nil))
		}, "missing_claim"},
		{"missing_claim: no jti (B requires it)", func(t *testing.T, e *env) string {
			return mint(t, e.b, e.bClaims.with("jti", nil))
		}, "missing_claim"},

		{"malformed: typ not at+jwt", func(t *testing.T, e *env) string {
			return mint(t, e.b.WithType("JWT"), e.bClaims)
		}, "malformed"},
		{"accepted: typ application/at+jwt", func(t *testing.T, e *env) string {
			return mint(t, e.b.WithType("application/AT+JWT"), e.bClaims)
		}, ""},

		{"insufficient_scope: scope lacks read", func(t *testing.T, e *env) string {
			return mint(t, e.a, e.aClaims.with("scope", "write readx"))
		}, "insufficient_scope"},
		{"insufficient_scope: no scope", func(t *testing.T, e *env) string {
			return mint(t, e.a, e.aClaims.with("scope", nil))
		}, "insufficient_scope"},
		{"accepted: scp array", func(t *testing.T, e *env) string {
			return mint(t, e.a, e.aClaims.with("scope", nil, "scp", []string{"write", "read"}))
		}, ""},

		// Tenant isolation: each issuer's tokens verify only with its keys.
		{"tenant: iss A signed by B's key and kid", func(t *testing.T, e *env) string {
			return mint(t, e.b, e.aClaims)
		}, "unknown_kid"},
		{"tenant: iss A signed by B's key under A's kid", func(t *testing.T, e *env) string {
			return mint(t, ecSigner(t, 1, "a1"), e.aClaims)
		}, "bad_signature"},
		{"tenant: iss B signed by A's key", func(t *testing.T, e *env) string {
			return mint(t, ecSigner(t, 0, "b1").WithType("at+jwt"), e.bClaims)
		}, "bad_signature"},
		{"tenant: iss B under A's policy claims", func(t *testing.T, e *env) string {
			return mint(t, e.b, e.aClaims.with("iss", issB)) // lacks billing aud
		}, "wrong_audience"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tok := tt.token(t, e)
			for attempt := range 2 { // the second attempt shows refusals are not cached
				res, err := e.p.Verify(ctx, tok)
				if got := ReasonOf(err); got != tt.want {
					t.Fatalf("attempt %d: reason %q (err %v), want %q", attempt, got, err, tt.want)
				}
				if tt.want != "" {
					if res != nil {
						t.Fatalf("refused token returned a result")
					}
					if n := e.p.Stats().Entries; n != 0 {
						t.Fatalf("a refusal was cached (%d entries)", n)
					}
				}
			}
		})
	}
}

func TestErrorsIs(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	_, err := e.p.Verify(ctx, mint(t, e.a, e.aClaims.with("scope", "write")))
	if !errors.Is(err, ErrInsufficientScope) {
		t.Errorf("errors.Is(%v, ErrInsufficientScope) = false", err)
	}
	var ve *Error
	if !errors.As(err, &ve) || ve.Reason() != "insufficient_scope" || !strings.Contains(ve.Detail, "read") {
		t.Errorf("want *Error naming scope read, got %#v", err)
	}
	if errors.Is(err, jose.ErrMissingClaim) {
		t.Error("insufficient scope matched a jose sentinel")
	}
	_, err = e.p.Verify(ctx, mint(t, e.a, e.aClaims.with("exp", t0.Unix()-3600)))
	if !errors.Is(err, jose.ErrExpired) || errors.Is(err, ErrInsufficientScope) {
		t.Errorf("expired token: errors.Is wrong for %v", err)
	}
	if got := ReasonOf(context.Canceled); got != "" {
		t.Errorf("ReasonOf(context.Canceled) = %q, want \"\"", got)
	}
}

func TestResult(t *testing.T) {
	e := newEnv(t, nil)
	tok := mint(t, e.a, e.aClaims.with("scope", "read write", "roles", []string{"x"}))
	res, err := e.p.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"Issuer", res.Issuer, issA},
		{"Subject", res.Subject, "alice"},
		{"ID", res.ID, "a-1"},
		{"Scope", res.Scope, "read write"},
		{"Expiry", res.Expiry, time.Unix(t0.Unix()+3600, 0)},
		{"KeyID", res.KeyID, "a1"},
		{"KeyThumbprint", res.KeyThumbprint, e.a.Key().Thumbprint()},
		{"Token.Raw", res.Token.Raw(), tok},
		{"Token.Claims.Subject", res.Token.Claims.Subject, "alice"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if raw, ok := res.Token.Claims.Raw("roles"); !ok || string(raw) != `["x"]` {
		t.Errorf("Claims.Raw(roles) = %s, %v", raw, ok)
	}
}

func TestUnknownKIDRefetch(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name          string
		stage         bool // the refetch finds the new key
		want          string
		wantRefetches int32
	}{
		{"refetch finds the key", true, "", 1},
		{"refetch does not find it", false, "unknown_kid", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			rotated := ecSigner(t, 3, "a2")
			if tt.stage {
				e.srcA.stage(e.a.Key(), rotated.Key())
			}
			tok := mint(t, rotated, e.aClaims)
			_, err := e.p.Verify(ctx, tok)
			if got := ReasonOf(err); got != tt.want {
				t.Fatalf("reason %q (%v), want %q", got, err, tt.want)
			}
			if n := e.srcA.refetches.Load(); n != tt.wantRefetches {
				t.Errorf("%d refetches, want %d", n, tt.wantRefetches)
			}
			if n := e.srcB.refetches.Load(); n != 0 {
				t.Errorf("the other tenant's source was refetched %d times", n)
			}
			// A known kid never refetches.
			if _, err := e.p.Verify(ctx, mint(t, e.a, e.aClaims)); err != nil {
				t.Fatal(err)
			}
			if n := e.srcA.refetches.Load(); n != tt.wantRefetches {
				t.Errorf("a known kid caused a refetch")
			}
		})
	}
}

func TestRevocation(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		cached bool // verify once before revoking, so the refusal comes from a hit
		revoke func(r *revoke.Memory)
		claims func(e *env) claims
		want   string
	}{
		{"jti on miss", false, func(r *revoke.Memory) { r.RevokeID(issA, "a-1", t0.Add(time.Hour)) },
			func(e *env) claims { return e.aClaims }, "revoked"},
		{"jti on hit", true, func(r *revoke.Memory) { r.RevokeID(issA, "a-1", t0.Add(time.Hour)) },
			func(e *env) claims { return e.aClaims }, "revoked"},
		{"jti of another issuer", true, func(r *revoke.Memory) { r.RevokeID(issB, "a-1", t0.Add(time.Hour)) },
			func(e *env) claims { return e.aClaims }, ""},
		{"subject before T on miss", false, func(r *revoke.Memory) { r.RevokeSubject(issA, "alice", t0.Add(time.Second)) },
			func(e *env) claims { return e.aClaims }, "revoked"},
		{"subject before T on hit", true, func(r *revoke.Memory) { r.RevokeSubject(issA, "alice", t0.Add(time.Second)) },
			func(e *env) claims { return e.aClaims }, "revoked"},
		{"subject: token issued after T", true, func(r *revoke.Memory) { r.RevokeSubject(issA, "alice", t0.Add(-time.Minute)) },
			func(e *env) claims { return e.aClaims }, ""},
		{"subject: token without iat fails closed", true, func(r *revoke.Memory) { r.RevokeSubject(issA, "alice", t0.Add(-time.Minute)) },
			func(e *env) claims { return e.aClaims.with("iat", nil) }, "revoked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tok := mint(t, e.a, tt.claims(e))
			if tt.cached {
				if _, err := e.p.Verify(ctx, tok); err != nil {
					t.Fatal(err)
				}
			}
			tt.revoke(e.rev)
			before := e.p.Stats()
			_, err := e.p.Verify(ctx, tok)
			if got := ReasonOf(err); got != tt.want {
				t.Fatalf("reason %q (%v), want %q", got, err, tt.want)
			}
			if tt.cached && e.p.Stats().Hits != before.Hits+1 {
				t.Errorf("the decision did not come from the cache")
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	ctx := context.Background()
	now := t0.Unix()
	s := ecSigner(t, 0, "k")
	base := claims{"iss": issA, "exp": now + 3600}
	tests := []struct {
		name   string
		policy func(p *Policy)
		claims claims
		want   string
	}{
		{"default leeway 60s accepts 59s late", nil, base.with("exp", now-59), ""},
		{"default leeway refuses 61s late", nil, base.with("exp", now-61), "expired"},
		{"negative leeway means none", func(p *Policy) { p.Leeway = -1 }, base.with("exp", now), "expired"},
		{"explicit leeway", func(p *Policy) { p.Leeway = 10 * time.Minute }, base.with("exp", now-500), ""},
		{"nil Require demands exp", nil, base.with("exp", nil), "missing_claim"},
		{"empty Require demands nothing", func(p *Policy) { p.Require = []string{} }, base.with("exp", nil), ""},
		{"Require sub", func(p *Policy) { p.Require = []string{"sub"} }, base.with("exp", nil), "missing_claim"},
		{"no Audiences accepts any aud", nil, base.with("aud", "whatever"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol := Policy{Issuer: issA, Keys: newSource(s.Key()), Algorithms: []jose.Alg{jose.ES256}}
			if tt.policy != nil {
				tt.policy(&pol)
			}
			p := mustNew(t, Config{Policies: []Policy{pol}, Now: func() time.Time { return t0 }})
			_, err := p.Verify(ctx, mint(t, s, tt.claims))
			if got := ReasonOf(err); got != tt.want {
				t.Fatalf("reason %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

func TestMaxTokenSize(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxTokenSize = 100 })
	tok := mint(t, e.a, e.aClaims)
	if _, err := e.p.Verify(context.Background(), tok); ReasonOf(err) != "too_large" {
		t.Fatalf("%d-byte token under a 100-byte limit: %v", len(tok), err)
	}
}

// TestKeysUnavailable: a token whose kid the issuer's keys lack while its
// JWKS endpoint fails is refused as jwks_unavailable, not unknown_kid; once
// the endpoint answers, the same unknown kid is unknown_kid again.
func TestKeysUnavailable(t *testing.T) {
	signer := ecSigner(t, 0, "k1")
	var up atomic.Bool
	other, err := jose.NewKeySet(ecSigner(t, 1, "k-other").Key()).MarshalJSON() // a good JWKS without k1
	if err != nil {
		t.Fatal(err)
	}
	jwks := string(other)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, jwks)
	}))
	defer srv.Close()
	src, err := verifykeys.NewRemote(verifykeys.RemoteConfig{URL: srv.URL, Algorithms: []jose.Alg{jose.ES256},
		RefetchInterval: time.Millisecond, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := src.Start(context.Background()); err == nil {
		t.Fatal("the first fetch from a failing endpoint succeeded")
	}
	p := mustNew(t, Config{Policies: []Policy{{Issuer: issA, Keys: src, Algorithms: []jose.Alg{jose.ES256}}}, Now: newClock().Now})
	tok := mint(t, signer, claims{"iss": issA, "sub": "alice", "exp": t0.Unix() + 3600})
	if _, err := p.Verify(context.Background(), tok); ReasonOf(err) != "jwks_unavailable" {
		t.Fatalf("JWKS endpoint down: %v (%q), want jwks_unavailable", err, ReasonOf(err))
	}
	up.Store(true)
	time.Sleep(5 * time.Millisecond) // past RefetchInterval
	if _, err := p.Verify(context.Background(), tok); ReasonOf(err) != "unknown_kid" {
		t.Fatalf("JWKS endpoint up, kid absent: %v (%q), want unknown_kid", err, ReasonOf(err))
	}
}
