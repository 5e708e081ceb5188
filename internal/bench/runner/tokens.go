package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/bench"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/jose"
)

// ClaimsSizes are the claim-set sizes a token scenario can send: the
// realistic ~300 bytes of 'keygate bench verify', or padded to about 1 KiB
// or 4 KiB (a "pad" claim) like tokens that carry roles and groups.
var ClaimsSizes = map[string]int{"small": 0, "1kb": 1024, "4kb": 4096}

// TokenSet says which tokens a pool holds.
type TokenSet struct {
	Signer   *jose.Signer // the key the target trusts
	Other    *jose.Signer // signs the invalid tokens: same algorithm, a key the target does not trust
	Distinct int          // distinct valid tokens, sent in turn
	// HitRatio, when above 0, is the share of the pool's entries taken
	// from HotTokens tokens sent over and over (cache hits once seen);
	// the other entries are the distinct tokens, each once per pass.
	HitRatio float64
	// Invalid is the share of the pool's entries signed by Other.
	Invalid    float64
	ClaimsSize string // a key of ClaimsSizes; "" is small
}

// HotTokens is how many tokens the hit share of a pool cycles through.
const HotTokens = 16

// Pool returns the tokens of the set in the order they are to be sent.
func (ts TokenSet) Pool(ctx context.Context) ([]string, error) {
	if ts.Distinct <= 0 {
		return nil, fmt.Errorf("%d distinct tokens", ts.Distinct)
	}
	if ts.HitRatio < 0 || ts.HitRatio >= 1 || ts.Invalid < 0 || ts.Invalid >= 1 || ts.HitRatio+ts.Invalid >= 1 {
		return nil, fmt.Errorf("hit ratio %v and invalid share %v must each be in [0, 1) and add up to less than 1",
			ts.HitRatio, ts.Invalid)
	}
	claims, err := sizedClaims(ts.ClaimsSize)
	if err != nil {
		return nil, err
	}
	// Positions: of every pass over the pool, a HitRatio share is hot, an
	// Invalid share invalid, the rest the distinct tokens, spread evenly.
	n := int(float64(ts.Distinct)/(1-ts.HitRatio-ts.Invalid) + 0.5)
	kinds := spread(n, int(float64(n)*ts.HitRatio+0.5), int(float64(n)*ts.Invalid+0.5))
	var nd, nx int
	for _, k := range kinds {
		switch k {
		case 'd':
			nd++
		case 'x':
			nx++
		}
	}
	hot, err := mintN(ctx, ts.Signer, claims, min(HotTokens, n))
	if err != nil {
		return nil, err
	}
	distinct, err := mintN(ctx, ts.Signer, claims, nd)
	if err != nil {
		return nil, err
	}
	var invalid []string
	if nx > 0 {
		if ts.Other == nil {
			return nil, fmt.Errorf("an invalid share needs a second key")
		}
		if invalid, err = mintN(ctx, ts.Other, claims, min(nx, 1024)); err != nil {
			return nil, err
		}
	}
	pool := make([]string, n)
	var di, hi, xi int
	for i, k := range kinds {
		switch k {
		case 'd':
			pool[i] = distinct[di]
			di++
		case 'h':
			pool[i] = hot[hi%len(hot)]
			hi++
		case 'x':
			pool[i] = invalid[xi%len(invalid)]
			xi++
		}
	}
	return pool, nil
}

func sizedClaims(size string) (mint.Claims, error) {
	c := bench.RealisticClaims()
	want, ok := ClaimsSizes[size]
	if size == "" {
		ok = true
	}
	if !ok {
		return c, fmt.Errorf("claims size %q is not small, 1kb or 4kb", size)
	}
	if want > 0 {
		base, err := mint.Payload(c, time.Now(), rand.Reader)
		if err != nil {
			return c, err
		}
		pad := max(want-len(base)-len(`,"pad":""`), 0)
		extra := map[string]json.RawMessage{"pad": json.RawMessage(`"` + strings.Repeat("x", pad) + `"`)}
		for k, v := range c.Extra {
			extra[k] = v
		}
		c.Extra = extra
	}
	return c, nil
}

// mintN signs n distinct tokens with the claims on all CPUs
// (bench.WriteTokens, as 'keygate bench tokens' mints them).
func mintN(ctx context.Context, s *jose.Signer, c mint.Claims, n int) ([]string, error) {
	var buf bytes.Buffer
	if err := bench.WriteTokens(ctx, &buf, bench.TokensConfig{Signer: s, Claims: c, N: n}); err != nil {
		return nil, fmt.Errorf("minting tokens: %w", err)
	}
	return strings.Fields(buf.String()), nil
}

// spread returns n kinds: hot 'h' and invalid 'x' entries spread evenly
// (integer steps, so the counts are exact), the rest distinct 'd'.
func spread(n, hot, invalid int) []byte {
	kinds := make([]byte, n)
	for i := range kinds {
		kinds[i] = 'd'
		if (i+1)*hot/n > i*hot/n {
			kinds[i] = 'h'
		}
	}
	rest := n - hot
	j := 0
	for i := range kinds {
		if kinds[i] != 'd' {
			continue
		}
		if rest > 0 && (j+1)*invalid/rest > j*invalid/rest {
			kinds[i] = 'x'
		}
		j++
	}
	return kinds
}
