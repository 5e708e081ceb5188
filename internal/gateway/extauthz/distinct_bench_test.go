package extauthz

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/verify"
	"github.com/keygate/keygate/internal/verify/verifykeys"
	"github.com/keygate/keygate/jose"
)

// distinctPool is how many distinct tokens BenchmarkCheckDistinct mints
// at least: the same number whatever b.N, so that two runs with different
// -benchtime Nx (N up to distinctPool) do the same set-up, and the
// difference of their instruction counts is the Checks' alone.
const distinctPool = 5000

// distinctTokens are ES256 tokens of issuer A, each with its own jti,
// minted once per process by one key.
var distinctTokens struct {
	sync.Mutex
	signer *jose.Signer
	tokens []string
	reqs   []*authv3.CheckRequest
}

// distinctChecks returns at least n distinct tokens and a CheckRequest as
// Envoy asks it for each, and the key that signed them.
func distinctChecks(tb testing.TB, n int) (*jose.Signer, []string, []*authv3.CheckRequest) {
	tb.Helper()
	d := &distinctTokens
	d.Lock()
	defer d.Unlock()
	if d.signer == nil {
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		if d.signer, err = jose.NewSigner(jose.ES256, "es256-1", priv); err != nil {
			tb.Fatal(err)
		}
	}
	for i := len(d.tokens); i < max(n, distinctPool); i++ {
		tok, err := d.signer.SignClaims(map[string]any{"iss": issA, "sub": "alice", "aud": "api",
			"exp": testNow.Add(time.Hour).Unix(), "scope": "read write", "tenant": "acme", "jti": "t-" + strconv.Itoa(i)})
		if err != nil {
			tb.Fatal(err)
		}
		d.tokens = append(d.tokens, tok)
		d.reqs = append(d.reqs, checkRequest("GET", "api.example.com", "/orders/42",
			map[string]string{"authorization": "Bearer " + tok}))
	}
	return d.signer, d.tokens, d.reqs
}

// distinctService is a Service as the server builds it for one ES256
// issuer (its verified-token cache empty), with metrics.
func distinctService(tb testing.TB, signer *jose.Signer) *Service {
	tb.Helper()
	m := telemetry.New()
	pipe, err := verify.New(verify.Config{
		Policies: []verify.Policy{{Issuer: issA, Keys: verifykeys.NewStatic(jose.NewKeySet(signer.Key())),
			Algorithms: []jose.Alg{jose.ES256}, Audiences: []string{"api"}, Headers: claimHeaders}},
		Revocation: revoke.NewMemory(),
		Now:        func() time.Time { return testNow },
		Observe:    m.VerifyObserver(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	metrics := m.Decisions(FrontEnd, nil)
	d, err := gateway.NewDecider(gateway.DeciderConfig{Verifier: pipe, Routes: routes, Cookie: "kg",
		Headers: []string{"X-Auth-Subject", "X-Auth-Scopes", "X-Auth-Tenant"}, Metrics: metrics})
	if err != nil {
		tb.Fatal(err)
	}
	return New(Config{Decider: func() *gateway.Decider { return d }, Metrics: metrics})
}

// BenchmarkCheckDistinct compares a Check of a token never seen before
// (keygate: route match, parse, ES256 verify, claims, cache insert, the
// answer) with the honest reference's work for the same token (reference:
// SHA-256 of the signing input and one verification with the key's table,
// the signature already decoded, answering a constant response), which is
// what `keygate bench server --mode grpc-es256-table` does per Check but
// over distinct signatures; reference-same verifies one signature again
// and again, as that server does. The gRPC transport, which all pay alike,
// is left out: the difference is keygate's own work per Check. Each run
// starts with an empty cache.
func BenchmarkCheckDistinct(b *testing.B) {
	b.Run("impl=keygate", func(b *testing.B) {
		signer, _, reqs := distinctChecks(b, b.N)
		svc := distinctService(b, signer)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if resp, _ := svc.Check(b.Context(), reqs[i]); resp.GetOkResponse() == nil {
				b.Fatalf("not allowed: %v", resp)
			}
		}
	})
	reference := func(b *testing.B, same bool) {
		signer, tokens, _ := distinctChecks(b, b.N)
		v := jose.NewP256Verifier(signer.Key().Public().(*ecdsa.PublicKey))
		msgs := make([][]byte, b.N)
		sigs := make([][]byte, b.N)
		for i := range b.N {
			t := tokens[i]
			if same {
				t = tokens[0]
			}
			dot := strings.LastIndexByte(t, '.')
			msgs[i] = []byte(t[:dot])
			sigs[i], _ = base64.RawURLEncoding.DecodeString(t[dot+1:])
		}
		ok := &authv3.CheckResponse{}
		check := func(i int) *authv3.CheckResponse {
			d := sha256.Sum256(msgs[i])
			if !v.VerifyP1363(d[:], sigs[i]) {
				return nil
			}
			return ok
		}
		check(0)
		check(0) // the table is built on the second verification
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if check(i) == nil {
				b.Fatal("reference verification failed")
			}
		}
	}
	b.Run("impl=reference", func(b *testing.B) { reference(b, false) })
	b.Run("impl=reference-same", func(b *testing.B) { reference(b, true) })
}
