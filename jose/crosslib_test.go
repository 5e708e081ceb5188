package jose

// Cross-checks against two widely used Go JOSE libraries, as test-only
// dependencies: github.com/golang-jwt/jwt/v5 and github.com/lestrrat-go/jwx/v3.
// Tokens minted by each verify in keygate, tokens minted by keygate verify in
// each, with the same key material and the claims read back equal; JWKs
// exported by one side parse on the other with the same RFC 7638 thumbprint.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	gjwt "github.com/golang-jwt/jwt/v5"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	xjwt "github.com/lestrrat-go/jwx/v3/jwt"
)

const (
	crossIssuer   = "https://issuer.example.com/"
	crossAudience = "https://api.example.com"
	crossSubject  = "user-42"
)

var crossExpiry = testNow.Add(time.Hour)

// crossPublic returns the verification half of one of privateKeys' keys: the
// secret itself for HMAC.
func crossPublic(priv any) any {
	switch p := priv.(type) {
	case []byte:
		return p
	case crypto.Signer:
		return p.Public()
	}
	panic("unexpected key type")
}

// crossJWXAlg maps a keygate Alg to the jwx algorithm of the same name.
func crossJWXAlg(t testing.TB, a Alg) jwa.SignatureAlgorithm {
	t.Helper()
	x, ok := jwa.LookupSignatureAlgorithm(a.String())
	if !ok {
		t.Fatalf("jwx does not know %v", a)
	}
	return x
}

// crossVerifier verifies with the one key of alg (kid "k1") in a KeySet,
// checking iss, aud and exp at testNow.
func crossVerifier(t testing.TB, alg Alg) *Verifier {
	t.Helper()
	v, err := NewVerifier(NewKeySet(testSigner(t, alg).Key()), []Alg{alg},
		Expected{Issuer: crossIssuer, Audience: []string{crossAudience}, Require: []string{"exp"}},
		WithClock(func() time.Time { return testNow }))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func crossCheckClaims(t *testing.T, tok *Token, alg Alg) {
	t.Helper()
	c := tok.Claims
	if c.Issuer != crossIssuer || c.Subject != crossSubject || !reflect.DeepEqual(c.Audience, []string{crossAudience}) ||
		c.Expiry != (NumericDate{crossExpiry.Unix(), true}) || c.IssuedAt != (NumericDate{testNow.Unix(), true}) {
		t.Errorf("claims read back wrong: %+v", c)
	}
	if tok.Header.Alg != alg || tok.Header.KeyID != "k1" {
		t.Errorf("header read back wrong: %+v", tok.Header)
	}
	// Outside the validity window the same token must be refused.
	late, err := NewVerifier(NewKeySet(testSigner(t, alg).Key()), []Alg{alg}, Expected{Issuer: crossIssuer},
		WithClock(func() time.Time { return crossExpiry }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := late.Verify(tok.Raw()); ReasonOf(err) != ReasonExpired {
		t.Errorf("at exp: got %v, want expired", err)
	}
}

// crossClaimsMap decodes a keygate-verified token's payload the way both
// other libraries hold claims: encoding/json into map[string]any.
func crossClaimsMap(t *testing.T, tok *Token) map[string]any {
	t.Helper()
	var m map[string]any
	if err := tok.Claims.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCrossLibrary(t *testing.T) {
	keys := privateKeys(t)
	for _, alg := range Algorithms() {
		priv := keys[alg]
		pub := crossPublic(priv)

		t.Run(alg.String()+"/golang-jwt-to-keygate", func(t *testing.T) {
			m := gjwt.GetSigningMethod(alg.String())
			if m == nil {
				t.Fatalf("golang-jwt has no %v", alg)
			}
			g := gjwt.NewWithClaims(m, gjwt.MapClaims{
				"iss": crossIssuer, "sub": crossSubject, "aud": []string{crossAudience},
				"exp": crossExpiry.Unix(), "iat": testNow.Unix(),
			})
			g.Header["kid"] = "k1"
			s, err := g.SignedString(priv)
			if err != nil {
				t.Fatalf("golang-jwt sign: %v", err)
			}
			tok, err := crossVerifier(t, alg).Verify(s)
			if err != nil {
				t.Fatalf("keygate refused golang-jwt token: %v", err)
			}
			crossCheckClaims(t, tok, alg)
		})

		t.Run(alg.String()+"/jwx-to-keygate", func(t *testing.T) {
			xt, err := xjwt.NewBuilder().Issuer(crossIssuer).Subject(crossSubject).Audience([]string{crossAudience}).
				Expiration(crossExpiry).IssuedAt(testNow).Build()
			if err != nil {
				t.Fatal(err)
			}
			hdr := jws.NewHeaders()
			if err := hdr.Set(jws.KeyIDKey, "k1"); err != nil {
				t.Fatal(err)
			}
			s, err := xjwt.Sign(xt, xjwt.WithKey(crossJWXAlg(t, alg), priv, jws.WithProtectedHeaders(hdr)))
			if err != nil {
				t.Fatalf("jwx sign: %v", err)
			}
			tok, err := crossVerifier(t, alg).Verify(string(s))
			if err != nil {
				t.Fatalf("keygate refused jwx token: %v", err)
			}
			crossCheckClaims(t, tok, alg)
		})

		t.Run(alg.String()+"/keygate-to-golang-jwt", func(t *testing.T) {
			s, err := testSigner(t, alg).Sign(testPayload)
			if err != nil {
				t.Fatal(err)
			}
			ours, err := Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			want := crossClaimsMap(t, ours)
			g, err := gjwt.Parse(s, func(tk *gjwt.Token) (any, error) { return pub, nil },
				gjwt.WithValidMethods([]string{alg.String()}), gjwt.WithIssuer(crossIssuer),
				gjwt.WithAudience(crossAudience), gjwt.WithExpirationRequired(), gjwt.WithIssuedAt(),
				gjwt.WithStrictDecoding(), gjwt.WithTimeFunc(func() time.Time { return testNow }))
			if err != nil {
				t.Fatalf("golang-jwt refused keygate token: %v", err)
			}
			if !g.Valid || g.Header["kid"] != "k1" || g.Header["alg"] != alg.String() {
				t.Errorf("golang-jwt token: valid %v header %v", g.Valid, g.Header)
			}
			got := map[string]any(g.Claims.(gjwt.MapClaims))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("golang-jwt claims differ:\n got %v\nwant %v", got, want)
			}
			// The same token, one bit flipped, must be refused by golang-jwt too.
			if _, err := gjwt.Parse(crossFlipSigBit(s), func(*gjwt.Token) (any, error) { return pub, nil },
				gjwt.WithValidMethods([]string{alg.String()}), gjwt.WithTimeFunc(func() time.Time { return testNow })); err == nil {
				t.Error("golang-jwt accepted a tampered keygate token")
			}
		})

		t.Run(alg.String()+"/keygate-to-jwx", func(t *testing.T) {
			s, err := testSigner(t, alg).Sign(testPayload)
			if err != nil {
				t.Fatal(err)
			}
			ours, err := Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			want := crossClaimsMap(t, ours)
			xt, err := xjwt.Parse([]byte(s), xjwt.WithKey(crossJWXAlg(t, alg), pub),
				xjwt.WithIssuer(crossIssuer), xjwt.WithAudience(crossAudience), xjwt.WithRequiredClaim("exp"),
				xjwt.WithClock(xjwt.ClockFunc(func() time.Time { return testNow })))
			if err != nil {
				t.Fatalf("jwx refused keygate token: %v", err)
			}
			iss, _ := xt.Issuer()
			sub, _ := xt.Subject()
			aud, _ := xt.Audience()
			exp, _ := xt.Expiration()
			iat, _ := xt.IssuedAt()
			nbf, _ := xt.NotBefore()
			jti, _ := xt.JwtID()
			c := ours.Claims
			if iss != c.Issuer || sub != c.Subject || !reflect.DeepEqual(aud, c.Audience) || jti != c.ID ||
				exp.Unix() != c.Expiry.Unix || iat.Unix() != c.IssuedAt.Unix || nbf.Unix() != c.NotBefore.Unix {
				t.Errorf("jwx registered claims differ from keygate's: iss %q sub %q aud %q jti %q exp %v iat %v nbf %v; keygate %+v",
					iss, sub, aud, jti, exp, iat, nbf, c)
			}
			// Every claim, registered or private, reads back equal.
			b, err := json.Marshal(xt)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("jwx claims differ:\n got %v\nwant %v", got, want)
			}
			if _, err := xjwt.Parse([]byte(crossFlipSigBit(s)), xjwt.WithKey(crossJWXAlg(t, alg), pub),
				xjwt.WithClock(xjwt.ClockFunc(func() time.Time { return testNow }))); err == nil {
				t.Error("jwx accepted a tampered keygate token")
			}
		})
	}
}

// crossFlipSigBit flips one bit in the middle of the signature segment, keeping
// the base64url canonical.
func crossFlipSigBit(tok string) string {
	b := []byte(tok)
	i := len(b) - 5
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// crossJWXThumbprint is jwx's RFC 7638 SHA-256 thumbprint, base64url-encoded.
func crossJWXThumbprint(t *testing.T, k jwk.Key) string {
	t.Helper()
	tp, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return b64.EncodeToString(tp)
}

func TestCrossLibraryJWK(t *testing.T) {
	keys := privateKeys(t)

	// Each exported keygate Key parses in jwx to the same key and thumbprint.
	for _, alg := range Algorithms() {
		if alg.family() == famHMAC {
			continue
		}
		t.Run(alg.String()+"/keygate-jwk-to-jwx", func(t *testing.T) {
			k := testSigner(t, alg).Key()
			b, err := k.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			xk, err := jwk.ParseKey(b)
			if err != nil {
				t.Fatalf("jwx refused %s: %v", b, err)
			}
			if got := crossJWXThumbprint(t, xk); got != k.Thumbprint() {
				t.Errorf("thumbprint: jwx %s, keygate %s", got, k.Thumbprint())
			}
			if kid, ok := xk.KeyID(); !ok || kid != "k1" {
				t.Errorf("kid: jwx read %q", kid)
			}
			if a, ok := xk.Algorithm(); !ok || a.String() != alg.String() {
				t.Errorf("alg: jwx read %v", a)
			}
			var raw any
			if err := jwk.Export(xk, &raw); err != nil {
				t.Fatal(err)
			}
			if !crossPublicEqual(raw, crossPublic(keys[alg])) {
				t.Errorf("jwx exported a different public key: %T", raw)
			}
		})
	}

	// HMAC: the thumbprint of the oct JWK agrees, though the secret is never
	// exported by Key.MarshalJSON.
	t.Run("HS256/oct-thumbprint", func(t *testing.T) {
		k := testSigner(t, HS256).Key()
		if _, err := k.MarshalJSON(); ReasonOf(err) != ReasonInvalidKey {
			t.Errorf("HMAC key MarshalJSON: got %v, want invalid_key", err)
		}
		xk, err := jwk.Import(keys[HS256].([]byte))
		if err != nil {
			t.Fatal(err)
		}
		if got := crossJWXThumbprint(t, xk); got != k.Thumbprint() {
			t.Errorf("oct thumbprint: jwx %s, keygate %s", got, k.Thumbprint())
		}
	})

	// Private JWKs written by jwx import into keygate with the same
	// thumbprint, and sign tokens jwx verifies with the public half.
	for _, alg := range []Alg{HS256, RS256, PS512, ES256, ES384, ES512, EdDSA} {
		t.Run(alg.String()+"/jwx-private-jwk-to-keygate", func(t *testing.T) {
			xk, err := jwk.Import(keys[alg])
			if err != nil {
				t.Fatal(err)
			}
			if err := xk.Set(jwk.KeyIDKey, "jwx-private"); err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(xk)
			if err != nil {
				t.Fatal(err)
			}
			j, err := ParseJWK(b)
			if err != nil {
				t.Fatalf("keygate refused jwx JWK: %v", err)
			}
			if !j.IsPrivate() || j.KeyID != "jwx-private" {
				t.Errorf("private %v kid %q", j.IsPrivate(), j.KeyID)
			}
			if tp := crossJWXThumbprint(t, xk); j.Thumbprint() != tp {
				t.Errorf("thumbprint: keygate %s, jwx %s", j.Thumbprint(), tp)
			}
			s, err := j.Signer(alg)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := s.Sign(testPayload)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := xjwt.Parse([]byte(tok), xjwt.WithKey(crossJWXAlg(t, alg), crossPublic(keys[alg])),
				xjwt.WithClock(xjwt.ClockFunc(func() time.Time { return testNow }))); err != nil {
				t.Errorf("jwx refused a token signed with its own JWK imported into keygate: %v", err)
			}
		})
	}

	// A whole keygate KeySet parses in jwx; the RSA key, bound to six
	// algorithms under one kid, is written once.
	t.Run("keyset/keygate-jwks-to-jwx", func(t *testing.T) {
		var ks []*Key
		thumbs := map[string]bool{}
		for _, alg := range Algorithms() {
			if alg.family() == famHMAC {
				continue
			}
			k := testSigner(t, alg).Key()
			ks = append(ks, k)
			thumbs[k.Thumbprint()] = true
		}
		b, err := NewKeySet(ks...).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		set, err := jwk.Parse(b)
		if err != nil {
			t.Fatalf("jwx refused %s: %v", b, err)
		}
		if set.Len() != len(thumbs) {
			t.Errorf("jwx read %d keys, want %d distinct", set.Len(), len(thumbs))
		}
		for i := 0; i < set.Len(); i++ {
			xk, _ := set.Key(i)
			if tp := crossJWXThumbprint(t, xk); !thumbs[tp] {
				t.Errorf("jwx key %d has thumbprint %s, not one of keygate's", i, tp)
			}
		}
		// And keygate reads its own output back to the same keys.
		again, err := ParseKeySet(b, Algorithms()...)
		if err != nil {
			t.Fatal(err)
		}
		if again.Len() != len(ks) || len(again.Skipped()) != 0 {
			t.Errorf("keygate re-read %d keys (skipped %v), want %d", again.Len(), again.Skipped(), len(ks))
		}
	})

	// A public JWKS exported by jwx parses in keygate with the same
	// thumbprints, and verifies tokens keygate signs with the private halves.
	t.Run("keyset/jwx-jwks-to-keygate", func(t *testing.T) {
		set := jwk.NewSet()
		type entry struct {
			kid string
			alg Alg
		}
		var want []entry
		for _, e := range []struct {
			kid     string
			alg     Alg
			withAlg bool
		}{
			{"jwx-rsa", RS256, false}, // no alg: keygate binds RS256 by default
			{"jwx-p256", ES256, true},
			{"jwx-p384", ES384, false}, // implied by the curve
			{"jwx-p521", ES512, true},
			{"jwx-ed25519", EdDSA, true},
		} {
			xk, err := jwk.PublicKeyOf(keys[e.alg])
			if err != nil {
				t.Fatal(err)
			}
			if err := xk.Set(jwk.KeyIDKey, e.kid); err != nil {
				t.Fatal(err)
			}
			if err := xk.Set(jwk.KeyUsageKey, "sig"); err != nil {
				t.Fatal(err)
			}
			if e.withAlg {
				if err := xk.Set(jwk.AlgorithmKey, crossJWXAlg(t, e.alg)); err != nil {
					t.Fatal(err)
				}
			}
			if err := set.AddKey(xk); err != nil {
				t.Fatal(err)
			}
			want = append(want, entry{e.kid, e.alg})
		}
		b, err := json.Marshal(set)
		if err != nil {
			t.Fatal(err)
		}
		ks, err := ParseKeySet(b)
		if err != nil {
			t.Fatalf("keygate refused jwx JWKS %s: %v", b, err)
		}
		if ks.Len() != len(want) || len(ks.Skipped()) != 0 {
			t.Fatalf("keygate read %d keys (skipped %v), want %d", ks.Len(), ks.Skipped(), len(want))
		}
		for i, e := range want {
			xk, _ := set.Key(i)
			k, err := ks.ResolveKey(e.kid, e.alg)
			if err != nil {
				t.Errorf("%s/%v: %v", e.kid, e.alg, err)
				continue
			}
			if tp := crossJWXThumbprint(t, xk); k.Thumbprint() != tp {
				t.Errorf("%s: thumbprint keygate %s, jwx %s", e.kid, k.Thumbprint(), tp)
			}
			s, err := NewSigner(e.alg, e.kid, keys[e.alg])
			if err != nil {
				t.Fatal(err)
			}
			tok, err := s.Sign(testPayload)
			if err != nil {
				t.Fatal(err)
			}
			v, err := NewVerifier(ks, []Alg{e.alg}, Expected{Issuer: crossIssuer}, WithClock(func() time.Time { return testNow }))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.Verify(tok); err != nil {
				t.Errorf("%s: token refused with the jwx-exported key: %v", e.kid, err)
			}
		}
	})
}

func crossPublicEqual(a, b any) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	switch a.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
		if e, ok := a.(equaler); ok {
			return e.Equal(b)
		}
	}
	return false
}
