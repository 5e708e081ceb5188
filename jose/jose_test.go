package jose

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"sync"
	"testing"
	"time"
)

// testNow is the fixed clock every claims test runs at.
var testNow = time.Unix(1_800_000_000, 0)

// testPayload is a realistic access token payload (~300 bytes).
var testPayload = []byte(`{"iss":"https://issuer.example.com/","sub":"user-7f3a9c2e-41d8-4b6a-9e0f-2c5d8a1b3e4f",` +
	`"aud":["https://api.example.com","https://billing.example.com"],"exp":1800003600,"iat":1800000000,` +
	`"nbf":1800000000,"jti":"b6f1c0de-8a2e-4f8b-9d3c-5e7a1f2b4c6d","scope":"read:orders write:orders read:profile",` +
	`"tenant":"acme-corp","roles":["admin","billing"]}`)

var (
	keysOnce sync.Once
	testKeys map[Alg]any
)

// privateKeys returns one private key per algorithm, made once per test binary.
func privateKeys(t testing.TB) map[Alg]any {
	t.Helper()
	keysOnce.Do(func() {
		rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		ec := func(c elliptic.Curve) *ecdsa.PrivateKey {
			k, err := ecdsa.GenerateKey(c, rand.Reader)
			if err != nil {
				panic(err)
			}
			return k
		}
		_, ed, _ := ed25519.GenerateKey(rand.Reader)
		secret := make([]byte, 64)
		rand.Read(secret)
		testKeys = map[Alg]any{
			HS256: secret, HS384: secret, HS512: secret,
			RS256: rsaKey, RS384: rsaKey, RS512: rsaKey,
			PS256: rsaKey, PS384: rsaKey, PS512: rsaKey,
			ES256: ec(elliptic.P256()), ES384: ec(elliptic.P384()), ES512: ec(elliptic.P521()),
			EdDSA: ed,
		}
	})
	return testKeys
}

func testSigner(t testing.TB, alg Alg) *Signer {
	t.Helper()
	s, err := NewSigner(alg, "k1", privateKeys(t)[alg])
	if err != nil {
		t.Fatalf("%v: NewSigner: %v", alg, err)
	}
	return s
}

func TestSignVerifyRoundTrip(t *testing.T) {
	for _, alg := range Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			s := testSigner(t, alg)
			tok, err := s.Sign(testPayload)
			if err != nil {
				t.Fatal(err)
			}
			v, err := NewVerifier(s.Key(), []Alg{alg}, Expected{Issuer: "https://issuer.example.com/",
				Audience: []string{"https://api.example.com"}, Require: []string{"exp"}}, WithClock(func() time.Time { return testNow }))
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.Verify(tok)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			c := got.Claims
			if c.Subject != "user-7f3a9c2e-41d8-4b6a-9e0f-2c5d8a1b3e4f" || len(c.Audience) != 2 || c.Expiry.Unix != 1800003600 ||
				!c.HasScope("write:orders") || c.HasScope("write") || got.Header.KeyID != "k1" || got.Header.Type != "JWT" {
				t.Errorf("claims decoded wrong: %+v header %+v", c, got.Header)
			}
			if raw, ok := c.Raw("roles"); !ok || string(raw) != `["admin","billing"]` {
				t.Errorf("Raw(roles) = %q, %v", raw, ok)
			}
			// Flip one bit of the signature: must fail with bad_signature.
			b := []byte(tok)
			b[len(b)-3] ^= 1
			if _, err := v.Verify(string(b)); !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrMalformed) {
				t.Errorf("tampered token: got %v", err)
			}
		})
	}
}

// TestVerifyAllocations pins the hot path's allocation budget: at most two
// objects (the Token and its one buffer) beyond what the standard library
// primitive allocates on its own, and one when the Token and the buffer fit
// one size class no larger than the two (newToken), as they do for the
// HS256 and RS256 tokens here. RS* and PS* verify on jose's RSAVerifier,
// which allocates nothing (TestRSAVerifierAllocations), so for them the
// Token and its buffer are all they allocate, where crypto/rsa alone makes
// 10 to 14.
func TestVerifyAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race (.ci/run runs them)")
	}
	for _, alg := range []Alg{HS256, HS384, HS512, RS256, PS256, ES256, ES384, ES512, EdDSA} {
		t.Run(alg.String(), func(t *testing.T) {
			s := testSigner(t, alg)
			tok, err := s.Sign(testPayload)
			if err != nil {
				t.Fatal(err)
			}
			v, _ := NewVerifier(s.Key(), []Alg{alg}, Expected{Issuer: "https://issuer.example.com/",
				Audience: []string{"https://api.example.com"}, Require: []string{"exp"}}, WithClock(func() time.Time { return testNow }))
			raw := rawVerifier(t, alg, tok, privateKeys(t)[alg])
			primitive := testing.AllocsPerRun(50, func() {
				if !raw() {
					t.Fatal("raw verify failed")
				}
			})
			ours := testing.AllocsPerRun(50, func() {
				if _, err := v.Verify(tok); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("%v: primitive %.0f allocs, keygate %.0f", alg, primitive, ours)
			if ours > primitive+2 {
				t.Errorf("%v: keygate verify allocates %.0f, primitive %.0f: more than 2 extra", alg, ours, primitive)
			}
			if f := alg.family(); (f == famRSA || f == famPSS) && ours > 2 {
				t.Errorf("%v: keygate verify allocates %.0f, want at most 2 (the Token and its buffer)", alg, ours)
			}
			if (alg == HS256 || alg == RS256) && ours > 1 {
				t.Errorf("%v: keygate verify allocates %.0f, want 1 (the Token with its buffer)", alg, ours)
			}
		})
	}
}

// TestKeyIDMustBeUTF8: a kid that is not UTF-8 is refused wherever a key or
// signer is made from a caller's kid, for every algorithm; encoding it would
// change it, and no parsed header could ever name it.
func TestKeyIDMustBeUTF8(t *testing.T) {
	const bad = "k\xd3"
	for alg, priv := range privateKeys(t) {
		if _, err := NewSigner(alg, bad, priv); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("NewSigner(%v, non-UTF-8 kid): %v, want ErrInvalidKey", alg, err)
		}
		if _, err := NewSigner(alg, "k\u00e9", priv); err != nil {
			t.Errorf("NewSigner(%v, UTF-8 kid): %v", alg, err)
		}
	}
}

// TestStringClaim: a string claim comes back as written, a view without a
// copy when it has no escapes and decoded when it has; any other value, or
// a missing claim, is not a string.
func TestStringClaim(t *testing.T) {
	tok := testSigner(t, HS256)
	signed, err := tok.Sign([]byte(`{"iss":"https://issuer.example.com/","tenant":"acme","client_id":"kgc_\u0041b","n":7,"o":{"a":"b"},"e":""}`))
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(tok.Key(), []Alg{HS256}, Expected{Issuer: "https://issuer.example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Verify(signed)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"tenant", "acme", true},
		{"client_id", "kgc_Ab", true}, // escaped: decoded
		{"e", "", true},
		{"n", "", false},
		{"o", "", false},
		{"missing", "", false},
	} {
		s, ok := got.Claims.StringClaim(tc.name)
		if s != tc.want || ok != tc.ok {
			t.Errorf("StringClaim(%q) = %q, %v; want %q, %v", tc.name, s, ok, tc.want, tc.ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { got.Claims.StringClaim("tenant") }); n != 0 && !raceEnabled {
		t.Errorf("StringClaim of an unescaped string: %v allocations, want 0", n)
	}
}
