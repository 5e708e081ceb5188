package transit

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/base64"
	"fmt"
	"math/big"
	"strings"
	"testing"
)

// TestECDSAP256VerifyAgreesWithCryptoECDSA: transit's ecdsa-p256 verify runs
// on jose's P256Verifier (a table of the key version's multiples, built on
// its second use). For every hash, prehashed inputs of several lengths, and
// both marshalings, the engine's verdict on a signature it made and on
// mutations of it (a flipped bit, high s, r and s swapped, r or s zero or n,
// a DER integer with a needless leading zero) is crypto/ecdsa's.
func TestECDSAP256VerifyAgreesWithCryptoECDSA(t *testing.T) {
	e := testEngine(t)
	k := newKey(t, e, ECDSAP256, CreateOptions{})
	v := k.latest()
	if v.p256Ver == nil || !v.p256Ver.Prepared() {
		t.Fatal("the key version's P-256 verifier is not prepared")
	}
	pub := v.ecPub
	n := pub.Curve.Params().N
	compared := 0
	for h := HashNone; h < maxHash; h++ {
		inputs := [][]byte{[]byte("transit ecdsa verify")}
		if h == HashNone {
			inputs = [][]byte{bytes.Repeat([]byte{0xab}, 32), bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte{7}, 64), {1, 2, 3}}
		}
		for _, m := range []Marshaling{MarshalASN1, MarshalJWS} {
			for ii, input := range inputs {
				o := SignOptions{HashAlgorithm: h, Marshaling: m, Prehashed: h == HashNone}
				name := fmt.Sprintf("%v/%v/input %d", h, m, ii)
				res, err := e.Sign(ctx, k, input, o)
				if err != nil {
					continue // a combination transit does not sign with
				}
				enc := base64.StdEncoding
				if m == MarshalJWS {
					enc = base64.RawURLEncoding
				}
				sig, err := enc.DecodeString(strings.TrimPrefix(res.Signature, "vault:v1:"))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				var r, s *big.Int
				if m == MarshalJWS {
					r, s = new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
				} else {
					rb, sb, ok := parseECDSASig(sig)
					if !ok {
						t.Fatalf("%s: own signature unparsable", name)
					}
					r, s = new(big.Int).SetBytes(rb), new(big.Int).SetBytes(sb)
				}
				encode := func(r, s *big.Int) []byte {
					if m == MarshalJWS {
						return append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
					}
					return derSig(r.Bytes(), s.Bytes())
				}
				flipped := bytes.Clone(sig)
				flipped[len(flipped)-5] ^= 0x10
				variants := [][]byte{sig, encode(r, new(big.Int).Sub(n, s)), flipped, encode(s, r),
					encode(big.NewInt(0), s), encode(r, big.NewInt(0)), encode(n, s), encode(r, n)}
				if m == MarshalASN1 {
					variants = append(variants, derSig(append([]byte{0}, r.Bytes()...), s.Bytes()))
				}
				d := digest(nil, ECDSAP256, input, &o)
				for vi, sg := range variants {
					text := "vault:v1:" + enc.EncodeToString(sg)
					got, err := e.Verify(ctx, k, input, text, o)
					if err != nil {
						t.Fatalf("%s variant %d: %v", name, vi, err)
					}
					want := false
					if m == MarshalJWS {
						want = len(sg) == 64 && ecdsa.Verify(pub, d, new(big.Int).SetBytes(sg[:32]), new(big.Int).SetBytes(sg[32:]))
					} else {
						want = ecdsa.VerifyASN1(pub, d, sg)
					}
					if got.Valid != want {
						t.Errorf("%s variant %d: transit %v, crypto/ecdsa %v", name, vi, got.Valid, want)
					}
					if vi < 2 && !got.Valid {
						t.Errorf("%s variant %d: a valid signature (or its high-s twin) refused", name, vi)
					}
					compared++
				}
			}
		}
	}
	if !v.p256Ver.HasTable() {
		t.Error("no table after many verifications")
	}
	t.Logf("%d verdicts compared with crypto/ecdsa", compared)
	if compared < 100 {
		t.Fatalf("only %d verdicts compared", compared)
	}
}

// derSig is the ASN.1 SEQUENCE of two INTEGERs with the given contents
// (written as given, so that a non-minimal one can be made).
func derSig(r, s []byte) []byte {
	integer := func(b []byte) []byte {
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return append([]byte{0x02, byte(len(b))}, b...)
	}
	body := append(integer(r), integer(s)...)
	return append([]byte{0x30, byte(len(body))}, body...)
}
