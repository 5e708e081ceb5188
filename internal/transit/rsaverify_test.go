package transit

import (
	"bytes"
	"crypto/rsa"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// TestRSAVerifyAgreesWithCryptoRSA: transit's RSA verify runs on jose's
// RSAVerifier with the modulus prepared once per key version. For every
// hash, padding and salt length transit takes, a signature it makes
// verifies, and the engine's verdict on it, on a bit-flipped copy and under
// another salt length option is crypto/rsa's.
func TestRSAVerifyAgreesWithCryptoRSA(t *testing.T) {
	e := testEngine(t)
	msg := []byte("transit verify")
	signed, verified := 0, 0
	for _, typ := range []KeyType{RSA2048, RSA4096} {
		k := newKey(t, e, typ, CreateOptions{})
		v := k.latest()
		if v.rsaVer == nil || !v.rsaVer.Prepared() {
			t.Fatalf("%v: the key version's RSA verifier is not prepared", typ)
		}
		pub := v.rsaPub
		maxSalt := (pub.N.BitLen()-1+7)/8 - 2
		for h := HashNone; h < maxHash; h++ {
			for _, alg := range []SignatureAlgorithm{PSS, PKCS1v15} {
				salts := []int{0}
				if alg == PSS {
					salts = []int{SaltLengthAuto, SaltLengthHash, 0, 20, maxSalt - h.Size()}
				}
				for _, salt := range salts {
					o := SignOptions{HashAlgorithm: h, SignatureAlgorithm: alg, SaltLength: salt}
					input := msg
					if h == HashNone {
						o.Prehashed = true
						input = SHA2_256.appendSum(nil, msg)
					}
					name := fmt.Sprintf("%v/%v/%v/salt %d", typ, h, alg, salt)
					s, err := e.Sign(ctx, k, input, o)
					if err != nil {
						continue // a combination transit does not sign with
					}
					signed++
					sig, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Signature, "vault:v1:"))
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					flipped := bytes.Clone(sig)
					flipped[len(flipped)/2] ^= 1
					verifyWith := []int{salt}
					if alg == PSS {
						verifyWith = append(verifyWith, SaltLengthAuto, SaltLengthHash, 0)
					}
					for _, vs := range verifyWith {
						vo := o
						vo.SaltLength = vs
						for i, sg := range [][]byte{sig, flipped} {
							text := "vault:v1:" + base64.StdEncoding.EncodeToString(sg)
							r, err := e.Verify(ctx, k, input, text, vo)
							if err != nil {
								if i == 0 && vs == salt {
									t.Errorf("%s: verify refused its own options: %v", name, err)
								}
								continue
							}
							verified++
							d := digest(nil, typ, input, &vo)
							var want error
							if alg == PSS {
								want = rsa.VerifyPSS(pub, cryptoHash(h), d, sg, &rsa.PSSOptions{SaltLength: vs})
							} else {
								want = rsa.VerifyPKCS1v15(pub, cryptoHash(h), d, sg)
							}
							if r.Valid != (want == nil) {
								t.Errorf("%s verified with salt %d (signature %d): transit %v, crypto/rsa %v", name, vs, i, r.Valid, want)
							}
							if i == 0 && vs == salt && !r.Valid {
								t.Errorf("%s: own signature refused", name)
							}
							if i == 1 && r.Valid {
								t.Errorf("%s: flipped signature accepted", name)
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d signatures made, %d verdicts compared with crypto/rsa", signed, verified)
	if signed < 40 {
		t.Fatalf("only %d option combinations signed: the test no longer covers transit's schemes", signed)
	}
}
