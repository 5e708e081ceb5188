//go:build !race

package jose

import (
	"testing"
	"time"
)

// TestES256VerifyAllocations pins a whole ES256 token verification's
// allocations once the key's table exists: the Token and its buffer, and
// the ten of math/big's ModInverse (s⁻¹ mod n), against crypto/ecdsa's ten
// for the signature alone. Without -race only: the race detector adds
// allocations of its own.
func TestES256VerifyAllocations(t *testing.T) {
	s := testSigner(t, ES256)
	tok, err := s.Sign(testPayload)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(s.Key(), []Alg{ES256}, Expected{Issuer: "https://issuer.example.com/",
		Audience: []string{"https://api.example.com"}, Require: []string{"exp"}}, WithClock(func() time.Time { return testNow }))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second verification builds the table
		if _, err := v.Verify(tok); err != nil {
			t.Fatal(err)
		}
	}
	if s.Key().p256 == nil || s.Key().p256.table.Load() == nil {
		t.Fatal("no P-256 table after two verifications")
	}
	raw := rawVerifier(t, ES256, tok, privateKeys(t)[ES256])
	primitive := testing.AllocsPerRun(100, func() {
		if !raw() {
			t.Fatal("raw verify failed")
		}
	})
	ours := testing.AllocsPerRun(100, func() {
		if _, err := v.Verify(tok); err != nil {
			t.Fatal(err)
		}
	})
	// The signature alone, through the verifier.
	i := len(tok) - 86 // the 64-byte signature is 86 base64url characters
	msg, rs := []byte(tok[:i-1]), vecB64(t, "token", tok[i:])
	alone := testing.AllocsPerRun(100, func() {
		if !s.Key().verify(msg, rs) {
			t.Fatal("signature does not verify")
		}
	})
	t.Logf("ES256: token %.0f allocations, signature alone %.0f; crypto/ecdsa.VerifyASN1 %.0f", ours, alone, primitive)
	if alone > 10 {
		t.Errorf("ES256 signature verification allocates %.0f, want at most 10 (math/big's ModInverse)", alone)
	}
	if ours > 12 {
		t.Errorf("ES256 token verification allocates %.0f, want at most 12", ours)
	}
}
