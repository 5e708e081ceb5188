package jose

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"strings"
	"testing"
)

// rawVerifier returns a closure that verifies tok's signature with the bare
// standard-library primitive, prepared as a careful caller would: key parsed
// once, signature decoded once, HMAC state reused. It is the baseline that
// keygate's overhead is measured against.
func rawVerifier(t testing.TB, alg Alg, tok string, priv any) func() bool {
	t.Helper()
	i := strings.LastIndexByte(tok, '.')
	msg := []byte(tok[:i])
	sig, err := b64.DecodeString(tok[i+1:])
	if err != nil {
		t.Fatal(err)
	}
	switch alg.family() {
	case famHMAC:
		var h hash.Hash
		switch alg {
		case HS256:
			h = hmac.New(sha256.New, priv.([]byte))
		case HS384:
			h = hmac.New(sha512.New384, priv.([]byte))
		default:
			h = hmac.New(sha512.New, priv.([]byte))
		}
		var buf [64]byte
		return func() bool {
			h.Reset()
			h.Write(msg)
			return hmac.Equal(h.Sum(buf[:0]), sig)
		}
	case famRSA, famPSS:
		pub := &priv.(*rsa.PrivateKey).PublicKey
		return func() bool {
			var d [64]byte
			digest := sum(alg.hash(), msg, &d)
			if alg.family() == famRSA {
				return rsa.VerifyPKCS1v15(pub, alg.hash(), digest, sig) == nil
			}
			return rsa.VerifyPSS(pub, alg.hash(), digest, sig, pssVerify) == nil
		}
	case famEC:
		pub := &priv.(*ecdsa.PrivateKey).PublicKey
		der, ok := p1363ToDER(nil, sig, len(sig)/2)
		if !ok {
			t.Fatal("bad ECDSA signature length")
		}
		return func() bool {
			var d [64]byte
			return ecdsa.VerifyASN1(pub, sum(alg.hash(), msg, &d), der)
		}
	default:
		pub := priv.(ed25519.PrivateKey).Public().(ed25519.PublicKey)
		return func() bool { return ed25519.Verify(pub, msg, sig) }
	}
}
