package keyfile

import (
	"testing"

	"github.com/keygate/keygate/jose"
)

// FuzzParseKeyFile feeds any bytes to the key-file readers, as PEM, JWK or
// JWKS, with any algorithm and kid. They return a key or an error, never
// panic; and when the same bytes make a signer, the verification keys read
// from them verify what it signs (a private key file is also its own public
// key file).
func FuzzParseKeyFile(f *testing.F) {
	for _, alg := range []jose.Alg{jose.ES256, jose.EdDSA, jose.RS256} {
		priv, err := Generate(alg, 0)
		if err != nil {
			f.Fatal(err)
		}
		pemData, _ := jose.MarshalPrivatePEM(priv)
		pubPEM, _ := jose.MarshalPublicPEM(priv.Public())
		k, _ := jose.NewKey(alg, "k1", priv.Public())
		jwk, _ := k.MarshalJSON()
		set, _ := jose.NewKeySet(k).MarshalJSON()
		for _, d := range [][]byte{pemData, pubPEM, jwk, set} {
			f.Add(d, uint8(alg), "")
		}
		f.Add(pemData, uint8(0), "named")
	}
	f.Add([]byte(`{"kty":"oct","k":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","alg":"HS256"}`), uint8(jose.HS256), "h")
	f.Add([]byte(`{"keys":[{"kty":"oct","k":"AA"}]}`), uint8(0), "")
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), uint8(0), "")
	f.Fuzz(func(t *testing.T, data []byte, algByte uint8, kid string) {
		alg := jose.Alg(algByte % 16)
		var algs []jose.Alg
		if alg != 0 {
			algs = []jose.Alg{alg}
		}
		keys, kerr := ParseKeys(data, algs, kid)
		for i, k := range keys {
			if k == nil {
				t.Fatalf("ParseKeys returned a nil key at %d", i)
			}
		}
		s, serr := parseSigner(data, alg, kid)
		if serr != nil || kerr != nil || sniff(data) == formatJWKS {
			return
		}
		tok, err := s.Sign([]byte(`{"sub":"x"}`))
		if err != nil {
			t.Fatalf("a signer read from the file cannot sign: %v", err)
		}
		v, err := jose.NewVerifier(jose.NewKeySet(keys...), []jose.Alg{s.Alg()}, jose.Expected{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(tok); err != nil {
			t.Fatalf("the file's own keys do not verify what its signer signed (%v, kid %q): %v", s.Alg(), kid, err)
		}
	})
}
