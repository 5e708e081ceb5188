package verify

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/verify/verifykeys"
	"github.com/keygate/keygate/jose"
)

// t0 is the tests' "now".
var t0 = time.Unix(1_800_000_000, 0)

// fakeSource is a keys.Source whose set the test swaps. Refetch installs
// the set staged with stage, if any, and counts calls.
type fakeSource struct {
	cur       atomic.Pointer[jose.KeySet]
	staged    atomic.Pointer[jose.KeySet]
	refetches atomic.Int32
}

var _ verifykeys.Source = (*fakeSource)(nil)

func newSource(ks ...*jose.Key) *fakeSource {
	f := new(fakeSource)
	f.set(ks...)
	return f
}

func (f *fakeSource) set(ks ...*jose.Key)   { f.cur.Store(jose.NewKeySet(ks...)) }
func (f *fakeSource) stage(ks ...*jose.Key) { f.staged.Store(jose.NewKeySet(ks...)) }
func (f *fakeSource) Current() *jose.KeySet { return f.cur.Load() }

func (f *fakeSource) Refetch(context.Context) *jose.KeySet {
	f.refetches.Add(1)
	if s := f.staged.Swap(nil); s != nil {
		f.cur.Store(s)
	}
	return f.cur.Load()
}

func (f *fakeSource) Status() verifykeys.Status { return verifykeys.Status{Keys: f.cur.Load().Len()} }

// clock is a settable clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := new(clock)
	c.ns.Store(t0.UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Keys are generated once per test binary; RSA generation is slow.
var (
	keysOnce sync.Once
	ecKeys   []*ecdsa.PrivateKey
	rsaKey   *rsa.PrivateKey
)

func testKeys(tb testing.TB) {
	keysOnce.Do(func() {
		for range 4 {
			k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				panic(err)
			}
			ecKeys = append(ecKeys, k)
		}
		var err error
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
}

// ecSigner returns an ES256 signer with the i-th test EC key.
func ecSigner(tb testing.TB, i int, kid string) *jose.Signer {
	tb.Helper()
	testKeys(tb)
	s, err := jose.NewSigner(jose.ES256, kid, ecKeys[i])
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func rsaSigner(tb testing.TB, kid string) *jose.Signer {
	tb.Helper()
	testKeys(tb)
	s, err := jose.NewSigner(jose.RS256, kid, rsaKey)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func hmacSigner(tb testing.TB, kid string, secret string) *jose.Signer {
	tb.Helper()
	s, err := jose.NewSigner(jose.HS256, kid, []byte(secret))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// claims is a claim set; with returns a copy with changes (a nil value
// deletes the claim).
type claims map[string]any

func (c claims) with(kv ...any) claims {
	out := maps.Clone(c)
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		if kv[i+1] == nil {
			delete(out, k)
		} else {
			out[k] = kv[i+1]
		}
	}
	return out
}

func mint(tb testing.TB, s *jose.Signer, c claims) string {
	tb.Helper()
	tok, err := s.SignClaims(map[string]any(c))
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

func mustNew(tb testing.TB, cfg Config) *Pipeline {
	tb.Helper()
	p, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
