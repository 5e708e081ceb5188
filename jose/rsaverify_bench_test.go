package jose

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"fmt"
	"testing"
)

// BenchmarkRSAVerify compares RSAVerifier with crypto/rsa on the same key,
// digest and signature, in one binary; with -count the two alternate, so a
// drifting machine affects both alike:
//
//	go test -run '^$' -bench 'BenchmarkRSAVerify/' -count 10 ./jose
func BenchmarkRSAVerify(b *testing.B) {
	for _, bits := range []int{2048, 4096} {
		priv := testRSAKey(b, bits)
		pub := &priv.PublicKey
		v := NewRSAVerifier(pub)
		digest := sha256.Sum256([]byte("the signing input of a token"))
		pkcs, err := rsa.SignPKCS1v15(nil, priv, crypto.SHA256, digest[:])
		if err != nil {
			b.Fatal(err)
		}
		pss, err := rsa.SignPSS(rand.Reader, priv, crypto.SHA256, digest[:], pssVerify)
		if err != nil {
			b.Fatal(err)
		}
		cases := []struct {
			name   string
			verify func() error
		}{
			{"PKCS1v15/keygate", func() error { return v.VerifyPKCS1v15(crypto.SHA256, digest[:], pkcs) }},
			{"PKCS1v15/crypto-rsa", func() error { return rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], pkcs) }},
			{"PSS/keygate", func() error { return v.VerifyPSS(crypto.SHA256, digest[:], pss, pssVerify) }},
			{"PSS/crypto-rsa", func() error { return rsa.VerifyPSS(pub, crypto.SHA256, digest[:], pss, pssVerify) }},
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("%d/%s", bits, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := c.verify(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
