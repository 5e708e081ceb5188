package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"testing"
	"time"

	gjwt "github.com/golang-jwt/jwt/v5"
	"github.com/lestrrat-go/jwx/v3/jwa"
	xjwt "github.com/lestrrat-go/jwx/v3/jwt"
)

// The comparison benchmarks. Every implementation verifies the same token
// (testPayload, ~330 bytes of claims) with a pre-parsed key and checks the
// same things: signature, iss, aud and exp against a fixed clock. "raw" is
// the standard library primitive alone over the same signing input.
//
//	go test -run '^$' -bench 'Benchmark(Verify|Sign)/' -benchmem -count 6 ./jose

var benchAlgs = []Alg{HS256, RS256, PS256, ES256, EdDSA}

const (
	benchIss = "https://issuer.example.com/"
	benchAud = "https://api.example.com"
)

func benchClock() time.Time { return testNow }

// benchClaims mirrors testPayload for the libraries that marshal structs.
type benchClaims struct {
	Iss    string   `json:"iss"`
	Sub    string   `json:"sub"`
	Aud    []string `json:"aud"`
	Exp    int64    `json:"exp"`
	Iat    int64    `json:"iat"`
	Nbf    int64    `json:"nbf"`
	Jti    string   `json:"jti"`
	Scope  string   `json:"scope"`
	Tenant string   `json:"tenant"`
	Roles  []string `json:"roles"`
}

var benchClaimsValue = benchClaims{
	Iss: benchIss, Sub: "user-7f3a9c2e-41d8-4b6a-9e0f-2c5d8a1b3e4f",
	Aud: []string{benchAud, "https://billing.example.com"}, Exp: 1800003600, Iat: 1800000000, Nbf: 1800000000,
	Jti: "b6f1c0de-8a2e-4f8b-9d3c-5e7a1f2b4c6d", Scope: "read:orders write:orders read:profile",
	Tenant: "acme-corp", Roles: []string{"admin", "billing"},
}

// benchPublic returns what the libraries take as the verification key.
func benchPublic(priv any) any {
	if s, ok := priv.(crypto.Signer); ok {
		return s.Public()
	}
	return priv // HMAC secret
}

func benchGJWTMethod(alg Alg) gjwt.SigningMethod { return gjwt.GetSigningMethod(alg.String()) }

func benchJWXAlg(alg Alg) jwa.SignatureAlgorithm {
	a, ok := jwa.LookupSignatureAlgorithm(alg.String())
	if !ok {
		panic("jwx lacks " + alg.String())
	}
	return a
}

func BenchmarkVerify(b *testing.B) {
	for _, alg := range benchAlgs {
		priv := privateKeys(b)[alg]
		s := testSigner(b, alg)
		tok, err := s.Sign(testPayload)
		if err != nil {
			b.Fatal(err)
		}
		pub := benchPublic(priv)
		b.Run(alg.String()+"/raw", func(b *testing.B) {
			verify := rawVerifier(b, alg, tok, priv)
			b.ReportAllocs()
			for b.Loop() {
				if !verify() {
					b.Fatal("raw verify failed")
				}
			}
		})
		b.Run(alg.String()+"/keygate", func(b *testing.B) {
			v, err := NewVerifier(s.Key(), []Alg{alg}, Expected{Issuer: benchIss, Audience: []string{benchAud},
				Require: []string{"exp"}}, WithClock(benchClock))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(alg.String()+"/golangjwt", func(b *testing.B) {
			p := gjwt.NewParser(gjwt.WithValidMethods([]string{alg.String()}), gjwt.WithIssuer(benchIss),
				gjwt.WithAudience(benchAud), gjwt.WithExpirationRequired(), gjwt.WithTimeFunc(benchClock))
			keyFunc := func(*gjwt.Token) (any, error) { return pub, nil }
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.ParseWithClaims(tok, &gjwt.RegisteredClaims{}, keyFunc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(alg.String()+"/jwx", func(b *testing.B) {
			opts := []xjwt.ParseOption{xjwt.WithKey(benchJWXAlg(alg), pub), xjwt.WithValidate(true),
				xjwt.WithIssuer(benchIss), xjwt.WithAudience(benchAud),
				xjwt.WithClock(xjwt.ClockFunc(benchClock))}
			raw := []byte(tok)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := xjwt.Parse(raw, opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSign(b *testing.B) {
	for _, alg := range benchAlgs {
		priv := privateKeys(b)[alg]
		s := testSigner(b, alg)
		b.Run(alg.String()+"/raw", func(b *testing.B) {
			sign := rawSigner(alg, priv)
			msg := []byte(s.prefix)
			msg = b64.AppendEncode(msg, testPayload)
			b.ReportAllocs()
			for b.Loop() {
				if err := sign(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(alg.String()+"/keygate", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.SignClaims(&benchClaimsValue); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(alg.String()+"/golangjwt", func(b *testing.B) {
			m := benchGJWTMethod(alg)
			claims := gjwt.MapClaims{}
			if err := json.Unmarshal(testPayload, &claims); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				t := gjwt.NewWithClaims(m, claims)
				t.Header["kid"] = "k1"
				if _, err := t.SignedString(priv); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(alg.String()+"/jwx", func(b *testing.B) {
			t, err := xjwt.ParseInsecure(mustSign(b, s))
			if err != nil {
				b.Fatal(err)
			}
			opt := xjwt.WithKey(benchJWXAlg(alg), priv)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := xjwt.Sign(t, opt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func mustSign(b *testing.B, s *Signer) []byte {
	tok, err := s.Sign(testPayload)
	if err != nil {
		b.Fatal(err)
	}
	return []byte(tok)
}

// rawSigner is the standard library signing primitive alone.
func rawSigner(alg Alg, priv any) func(msg []byte) error {
	switch alg.family() {
	case famHMAC:
		h := hmac.New(sha256.New, priv.([]byte))
		var buf [64]byte
		return func(msg []byte) error {
			h.Reset()
			h.Write(msg)
			h.Sum(buf[:0])
			return nil
		}
	case famRSA:
		return func(msg []byte) error {
			d := sha256.Sum256(msg)
			_, err := rsa.SignPKCS1v15(nil, priv.(*rsa.PrivateKey), crypto.SHA256, d[:])
			return err
		}
	case famPSS:
		opts := &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}
		return func(msg []byte) error {
			d := sha256.Sum256(msg)
			_, err := rsa.SignPSS(rand.Reader, priv.(*rsa.PrivateKey), crypto.SHA256, d[:], opts)
			return err
		}
	case famEC:
		return func(msg []byte) error {
			d := sha256.Sum256(msg)
			_, err := ecdsa.SignASN1(rand.Reader, priv.(*ecdsa.PrivateKey), d[:])
			return err
		}
	default:
		return func(msg []byte) error {
			ed25519.Sign(priv.(ed25519.PrivateKey), msg)
			return nil
		}
	}
}
