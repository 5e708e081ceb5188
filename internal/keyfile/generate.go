package keyfile

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"slices"

	"github.com/keygate/keygate/jose"
)

// DefaultRSABits is the RSA modulus size Generate uses when given 0.
const DefaultRSABits = 2048

// RSABits lists the RSA modulus sizes Generate accepts.
var RSABits = []int{2048, 3072, 4096}

// IsHMAC reports whether alg is one of HS256, HS384 and HS512.
func IsHMAC(alg jose.Alg) bool {
	return alg == jose.HS256 || alg == jose.HS384 || alg == jose.HS512
}

// IsRSA reports whether alg is one of the RS* and PS* algorithms.
func IsRSA(alg jose.Alg) bool {
	switch alg {
	case jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512:
		return true
	}
	return false
}

// Generate creates a private key for alg: an ECDSA key on the curve alg
// names, an Ed25519 key, or an RSA key of bits (0 means DefaultRSABits).
func Generate(alg jose.Alg, bits int) (crypto.Signer, error) {
	if bits != 0 && !IsRSA(alg) {
		return nil, fmt.Errorf("a key size applies only to RSA algorithms, not %s", alg)
	}
	switch alg {
	case jose.ES256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.ES384:
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case jose.ES512:
		return ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case jose.EdDSA:
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		return priv, err
	}
	if !IsRSA(alg) {
		return nil, fmt.Errorf("%s does not use a private key (HMAC keys are secrets: use GenerateSecret)", alg)
	}
	if bits == 0 {
		bits = DefaultRSABits
	}
	if !slices.Contains(RSABits, bits) {
		return nil, fmt.Errorf("RSA key size %d is not one of %v", bits, RSABits)
	}
	return rsa.GenerateKey(rand.Reader, bits)
}

// GenerateSecret returns a random HMAC secret as long as alg's hash output,
// the minimum RFC 7518 §3.2 allows and all that adds strength.
func GenerateSecret(alg jose.Alg) ([]byte, error) {
	n := map[jose.Alg]int{jose.HS256: 32, jose.HS384: 48, jose.HS512: 64}[alg]
	if n == 0 {
		return nil, fmt.Errorf("%s is not an HMAC algorithm", alg)
	}
	secret := make([]byte, n)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	return secret, nil
}

// DefaultAlg returns the algorithm a public key implies: ES256, ES384 or
// ES512 by curve, EdDSA for Ed25519, and RS256 for RSA.
func DefaultAlg(pub crypto.PublicKey) (jose.Alg, error) {
	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		switch p.Curve {
		case elliptic.P256():
			return jose.ES256, nil
		case elliptic.P384():
			return jose.ES384, nil
		case elliptic.P521():
			return jose.ES512, nil
		}
		return 0, fmt.Errorf("unsupported elliptic curve %s", p.Curve.Params().Name)
	case ed25519.PublicKey:
		return jose.EdDSA, nil
	case *rsa.PublicKey:
		return jose.RS256, nil
	}
	return 0, fmt.Errorf("unsupported public key type %T", pub)
}
