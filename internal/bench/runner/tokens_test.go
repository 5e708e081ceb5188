package runner

import (
	"context"
	"strings"
	"testing"

	"github.com/keygate/keygate/jose"
)

func TestTokenSetPool(t *testing.T) {
	s, _, err := newTrustedKey(&Env{Dir: t.TempDir()}, jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := newTrustedKey(&Env{Dir: t.TempDir()}, jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name             string
		ts               TokenSet
		size, hot, inval int // pool size, entries from hot tokens, invalid entries
	}{
		{"distinct only", TokenSet{Distinct: 100}, 100, 0, 0},
		{"half hits", TokenSet{Distinct: 100, HitRatio: 0.5}, 200, 100, 0},
		{"hits and invalid", TokenSet{Distinct: 60, HitRatio: 0.25, Invalid: 0.15}, 100, 25, 15},
	} {
		c.ts.Signer, c.ts.Other = s, other
		pool, err := c.ts.Pool(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(pool) != c.size {
			t.Errorf("%s: pool of %d, want %d", c.name, len(pool), c.size)
		}
		v, err := jose.NewVerifier(jose.NewKeySet(s.Key()), []jose.Alg{jose.ES256}, jose.Expected{})
		if err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		inval := 0
		for _, tok := range pool {
			count[tok]++
			if _, err := v.Verify(tok); err != nil {
				inval++
			}
		}
		hot := 0
		for _, n := range count {
			if n > 1 {
				hot += n
			}
		}
		// Invalid tokens repeat too (at most 1024 are minted); count them apart.
		if c.inval > 0 && inval != c.inval {
			t.Errorf("%s: %d entries do not verify, want %d", c.name, inval, c.inval)
		}
		if c.inval == 0 && inval != 0 {
			t.Errorf("%s: %d entries do not verify", c.name, inval)
		}
		if c.inval == 0 && hot != c.hot {
			t.Errorf("%s: %d entries repeat a token, want %d", c.name, hot, c.hot)
		}
		if distinct := len(count); c.inval == 0 && distinct != c.ts.Distinct+min(HotTokens, c.hot) {
			t.Errorf("%s: %d distinct tokens", c.name, distinct)
		}
	}
	for _, bad := range []TokenSet{{Distinct: 0}, {Distinct: 5, HitRatio: 1}, {Distinct: 5, HitRatio: 0.6, Invalid: 0.5}, {Distinct: 5, Invalid: 0.2}} {
		bad.Signer = s
		if _, err := bad.Pool(context.Background()); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestSizedClaims(t *testing.T) {
	s, _, _ := newTrustedKey(&Env{Dir: t.TempDir()}, jose.EdDSA)
	for size, want := range map[string]int{"small": 0, "1kb": 1024, "4kb": 4096} {
		pool, err := TokenSet{Signer: s, Distinct: 1, ClaimsSize: size}.Pool(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		payload := strings.Split(pool[0], ".")[1]
		n := len(payload) * 3 / 4
		if want == 0 && (n < 250 || n > 450) || want > 0 && (n < want-8 || n > want+8) {
			t.Errorf("%s: claims of %d bytes", size, n)
		}
	}
	if _, err := sizedClaims("huge"); err == nil {
		t.Error("claims size huge: no error")
	}
}
