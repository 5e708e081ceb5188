package verify

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/asn1"
	"fmt"
	"math/big"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/jose"
)

// BenchmarkPipeline measures the request path. hit is a cached token;
// miss/ALG verifies a different token every iteration (a pool of
// pre-signed tokens cycled through a cache too small to keep any), so it
// includes the cache lookup, singleflight, parse, key lookup, signature,
// claims, scopes, revocation, header mapping and cache insert with
// eviction; raw/ALG is the standard library primitive alone (SHA-256 and
// ecdsa.VerifyASN1 or rsa.VerifyPKCS1v15 with a pre-parsed key) over the
// same tokens' signing inputs, so miss/raw is the pipeline's overhead;
// ratio/ALG measures that ratio directly (its ns/op covers 8 of each).
//
//	go test -run '^$' -bench BenchmarkPipeline -benchmem -count 6 ./internal/verify
func BenchmarkPipeline(b *testing.B) {
	ctx := context.Background()
	b.Run("hit", func(b *testing.B) {
		p, toks := benchPipeline(b, jose.ES256, 0)
		tok := toks[0]
		if _, err := p.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Verify(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	// hit/fresh presents the cached token in a string of its own each
	// time, as a server's request does, rather than the very string that
	// was verified.
	b.Run("hit/fresh", func(b *testing.B) {
		p, toks := benchPipeline(b, jose.ES256, 0)
		if _, err := p.Verify(ctx, toks[0]); err != nil {
			b.Fatal(err)
		}
		fresh := make([]string, 256)
		for i := range fresh {
			fresh[i] = strings.Clone(toks[0])
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := p.Verify(ctx, fresh[i%len(fresh)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("hit/parallel", func(b *testing.B) {
		p, toks := benchPipeline(b, jose.ES256, 0)
		for _, tok := range toks[:64] {
			if _, err := p.Verify(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := p.Verify(ctx, toks[i&63]); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
	})
	for _, alg := range []jose.Alg{jose.ES256, jose.RS256} {
		b.Run("miss/"+alg.String(), func(b *testing.B) {
			p, toks := benchPipeline(b, alg, 32)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := p.Verify(ctx, toks[i%len(toks)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if st := p.Stats(); st.Hits != 0 {
				b.Fatalf("%d of %d requests hit the cache", st.Hits, st.Hits+st.Misses)
			}
		})
		// ratio/ALG interleaves the two in batches, so that load from
		// elsewhere on the machine hits both alike; its miss/raw metric is
		// the steadier reading of the overhead.
		b.Run("ratio/"+alg.String(), func(b *testing.B) {
			p, toks := benchPipeline(b, alg, 32)
			verify := rawVerifier(b, alg)
			const batch = 8
			var missNS, rawNS time.Duration
			i := 0
			for b.Loop() {
				start := time.Now()
				for j := range batch {
					if !verify(i + j) {
						b.Fatal("raw verify failed")
					}
				}
				mid := time.Now()
				for j := range batch {
					if _, err := p.Verify(ctx, toks[(i+j)%len(toks)]); err != nil {
						b.Fatal(err)
					}
				}
				rawNS += mid.Sub(start)
				missNS += time.Since(mid)
				i += batch
			}
			b.ReportMetric(float64(missNS)/float64(rawNS), "miss/raw")
		})
		b.Run("raw/"+alg.String(), func(b *testing.B) {
			verify := rawVerifier(b, alg)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if !verify(i) {
					b.Fatal("raw verify failed")
				}
				i++
			}
		})
	}
}

const benchTokens = 256

var (
	benchOnce sync.Once
	benchToks map[jose.Alg][]string
)

func benchSigner(tb testing.TB, alg jose.Alg) *jose.Signer {
	if alg == jose.RS256 {
		return rsaSigner(tb, "bench")
	}
	return ecSigner(tb, 0, "bench")
}

// benchTokenPool signs benchTokens distinct tokens per algorithm, once.
func benchTokenPool(tb testing.TB) map[jose.Alg][]string {
	benchOnce.Do(func() {
		benchToks = map[jose.Alg][]string{}
		for _, alg := range []jose.Alg{jose.ES256, jose.RS256} {
			s := benchSigner(tb, alg)
			for i := range benchTokens {
				benchToks[alg] = append(benchToks[alg], mint(tb, s, claims{
					"iss": issA, "sub": "user-7f3a9c2e-41d8-4b6a-9e0f-2c5d8a1b3e4f",
					"aud": []string{"https://api.example.com", "https://billing.example.com"},
					"exp": t0.Unix() + 3600, "iat": t0.Unix(), "nbf": t0.Unix(),
					"jti":   fmt.Sprintf("b6f1c0de-8a2e-4f8b-9d3c-%012d", i),
					"scope": "read:orders write:orders read:profile", "tenant": "acme-corp",
					"roles": []string{"admin", "billing"},
				}))
			}
		}
	})
	return benchToks
}

// benchPipeline is a realistic policy: audience, a required scope, two
// mapped headers, and a revocation list with entries.
func benchPipeline(tb testing.TB, alg jose.Alg, cacheEntries int) (*Pipeline, []string) {
	toks := benchTokenPool(tb)[alg]
	rev := revoke.NewMemory()
	rev.Update(func(b *revoke.Batch) {
		for i := range 1000 {
			b.RevokeID(issA, fmt.Sprint("revoked-", i), t0.Add(time.Hour))
			b.RevokeSubject(issA, fmt.Sprint("gone-", i), t0)
		}
	})
	p := mustNew(tb, Config{
		Policies: []Policy{{
			Issuer: issA, Keys: newSource(benchSigner(tb, alg).Key()), Algorithms: []jose.Alg{alg},
			Audiences: []string{"https://api.example.com"}, Scopes: []string{"read:orders"},
			Headers: []HeaderMapping{{"X-User", "sub"}, {"X-Roles", "roles"}},
		}},
		Revocation: rev,
		Cache:      CacheConfig{MaxEntries: cacheEntries},
		Now:        func() time.Time { return t0 },
	})
	return p, toks
}

// rawVerifier returns the standard library check of the i-th pool token
// (modulo the pool), with everything but the hash and the verify done
// beforehand.
func rawVerifier(tb testing.TB, alg jose.Alg) func(i int) bool {
	toks := benchTokenPool(tb)[alg]
	inputs := make([][]byte, len(toks))
	sigs := make([][]byte, len(toks))
	for i, tok := range toks {
		t, err := jose.Parse(tok)
		if err != nil {
			tb.Fatal(err)
		}
		inputs[i] = []byte(t.SigningInput())
		sigs[i] = t.Signature()
		if alg == jose.ES256 { // JWS r‖s to ASN.1, as crypto/ecdsa wants
			der, err := asn1.Marshal(struct{ R, S *big.Int }{
				new(big.Int).SetBytes(sigs[i][:32]), new(big.Int).SetBytes(sigs[i][32:])})
			if err != nil {
				tb.Fatal(err)
			}
			sigs[i] = der
		}
	}
	n := len(toks)
	switch pub := benchSigner(tb, alg).Key().Public().(type) {
	case *ecdsa.PublicKey:
		return func(i int) bool {
			d := sha256.Sum256(inputs[i%n])
			return ecdsa.VerifyASN1(pub, d[:], sigs[i%n])
		}
	case *rsa.PublicKey:
		return func(i int) bool {
			d := sha256.Sum256(inputs[i%n])
			return rsa.VerifyPKCS1v15(pub, crypto.SHA256, d[:], sigs[i%n]) == nil
		}
	}
	tb.Fatal("unexpected key type")
	return nil
}

// BenchmarkCacheFlood is the miss path under a flood of distinct HS256
// tokens, where signature cost no longer hides the pipeline's own.
func BenchmarkCacheFlood(b *testing.B) {
	s := hmacSigner(b, "h", strings.Repeat("s", 32))
	toks := make([]string, 4096)
	for i := range toks {
		toks[i] = mint(b, s, claims{"iss": issA, "sub": "u", "exp": t0.Unix() + 3600, "jti": fmt.Sprint(i)})
	}
	p := mustNew(b, Config{
		Policies: []Policy{{Issuer: issA, Keys: newSource(s.Key()), Algorithms: []jose.Alg{jose.HS256}}},
		Cache:    CacheConfig{MaxEntries: 1024},
		Now:      func() time.Time { return t0 },
	})
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := p.Verify(ctx, toks[i%len(toks)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

var (
	distinctOnce sync.Once
	distinctToks []string
)

// distinctPool signs n distinct ES256 tokens shaped like benchTokenPool's,
// once per test binary.
func distinctPool(tb testing.TB, n int) []string {
	distinctOnce.Do(func() {
		s := benchSigner(tb, jose.ES256)
		for i := range n {
			distinctToks = append(distinctToks, mint(tb, s, distinctClaims(i)))
		}
	})
	return distinctToks
}

// distinctClaims are the i-th distinct token's claims: benchTokenPool's
// shape, with a subject and jti of its own.
func distinctClaims(i int) claims {
	return claims{
		"iss": issA, "sub": fmt.Sprintf("user-7f3a9c2e-41d8-4b6a-9e0f-%012d", i),
		"aud": []string{"https://api.example.com", "https://billing.example.com"},
		"exp": t0.Unix() + 3600, "iat": t0.Unix(), "nbf": t0.Unix(),
		"jti":   fmt.Sprintf("b6f1c0de-8a2e-4f8b-9d3c-%012d", i),
		"scope": "read:orders write:orders read:profile", "tenant": "acme-corp",
		"roles": []string{"admin", "billing"},
	}
}

// BenchmarkDistinct verifies a distinct ES256 token every iteration with
// the cache at its default bounds (on) and disabled (off). The pool is
// larger than what the default 64 MiB holds, and the cache is filled with
// it first, so that on runs with a full cache that never hits: the gap
// between on and off is what keeping the cache costs, mostly the
// collector marking it. Run the two alternately and compare medians:
//
//	go test -run '^$' -bench BenchmarkDistinct -cpu 1 -count 6 ./internal/verify
func BenchmarkDistinct(b *testing.B) {
	const pool = 40_000
	ctx := context.Background()
	for _, mode := range []string{"on", "off"} {
		b.Run("cache="+mode, func(b *testing.B) {
			toks := distinctPool(b, pool)
			p, _ := benchPipeline(b, jose.ES256, 0)
			p.cache.disabled = mode == "off"
			if mode == "on" {
				for _, tok := range toks {
					if _, err := p.Verify(ctx, tok); err != nil {
						b.Fatal(err)
					}
				}
			}
			runtime.GC()
			before, gc0 := p.Stats(), gcCPU()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := p.Verify(ctx, toks[i%pool]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			st := p.Stats()
			b.ReportMetric(float64(gcCPU()-gc0)/float64(i), "gc-ns/op")
			b.ReportMetric(float64(st.Hits-before.Hits)/float64(i), "hits/op")
			b.ReportMetric(float64(st.Entries), "entries")
		})
	}
}

// gcCPU is the CPU time the collector has used so far (as of the last
// collection's end).
func gcCPU() time.Duration {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	return time.Duration(s[0].Value.Float64() * 1e9)
}
