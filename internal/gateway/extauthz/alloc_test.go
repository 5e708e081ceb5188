package extauthz

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/keygate/keygate/jose"
)

// TestCheckAllocs bounds the allocations of an allowed Check on a cached
// token: the answer's messages, in one object; the credential headers
// are pooled and the decision itself allocates nothing.
func TestCheckAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	f := newFixture(t)
	req := checkRequest("GET", "api.example.com", "/orders/42?expand=items",
		map[string]string{"authorization": "Bearer " + f.sign(t, "ES256", nil)})
	if resp, _ := f.svc.Check(t.Context(), req); resp.GetOkResponse() == nil {
		t.Fatalf("not allowed: %v", resp)
	}
	const max = 1
	if n := testing.AllocsPerRun(100, func() { f.svc.Check(t.Context(), req) }); n > max {
		t.Errorf("an allowed Check allocates %v times, want at most %d", n, max)
	}
}

// TestCheckDistinctAllocs bounds the allocations of an allowed Check on a
// token never seen before: the ES256 verification's own (math/big's scalar
// inverse, counted here on the same signatures with the key's table alone)
// and 3 more: the parsed token, its cache entry and the answer. The cache
// first holds 2,000 other tokens, as a running server's does, so that the
// growth of its maps, rarer as they grow, is not what is counted.
func TestCheckDistinctAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	const runs = 200
	signer, tokens, reqs := distinctChecks(t, 3000)
	svc := distinctService(t, signer)
	for _, req := range reqs[1000:3000] {
		if resp, _ := svc.Check(t.Context(), req); resp.GetOkResponse() == nil {
			t.Fatalf("not allowed: %v", resp)
		}
	}
	v := jose.NewP256Verifier(signer.Key().Public().(*ecdsa.PublicKey))
	msgs, sigs := make([][]byte, runs+1), make([][]byte, runs+1)
	for i, tok := range tokens[:runs+1] {
		dot := strings.LastIndexByte(tok, '.')
		msgs[i] = []byte(tok[:dot])
		sigs[i], _ = base64.RawURLEncoding.DecodeString(tok[dot+1:])
	}
	i := 0
	raw := testing.AllocsPerRun(runs, func() {
		d := sha256.Sum256(msgs[i])
		if !v.VerifyP1363(d[:], sigs[i]) {
			t.Fatal("raw verification failed")
		}
		i++
	})
	i = 0
	n := testing.AllocsPerRun(runs, func() {
		if resp, _ := svc.Check(t.Context(), reqs[i]); resp.GetOkResponse() == nil {
			t.Fatalf("not allowed: %v", resp)
		}
		i++
	})
	t.Logf("a Check of a new token allocates %v times, the verification alone %v", n, raw)
	if n > raw+3 {
		t.Errorf("an allowed Check of a new token allocates %v times, want at most %v (the verification's own) + 3", n, raw)
	}
}
