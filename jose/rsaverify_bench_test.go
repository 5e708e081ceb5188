package jose

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"
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

// BenchmarkRSAVerifyPaired times RSAVerifier and crypto/rsa call by call, in
// alternating order, within each iteration, and reports each one's mean time
// and their ratio. On a shared machine whose speed drifts by 20% or more
// within seconds, the separate sub-benchmarks of BenchmarkRSAVerify can land
// in different moments; here both sides always see the same moment, so the
// ratio is the figure to read (the allocation counts come from
// BenchmarkRSAVerify):
//
//	go test -run '^$' -bench 'BenchmarkRSAVerifyPaired/' -count 10 ./jose
func BenchmarkRSAVerifyPaired(b *testing.B) {
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
			name         string
			ours, theirs func() error
		}{
			{"PKCS1v15",
				func() error { return v.VerifyPKCS1v15(crypto.SHA256, digest[:], pkcs) },
				func() error { return rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], pkcs) }},
			{"PSS",
				func() error { return v.VerifyPSS(crypto.SHA256, digest[:], pss, pssVerify) },
				func() error { return rsa.VerifyPSS(pub, crypto.SHA256, digest[:], pss, pssVerify) }},
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("%d/%s", bits, c.name), func(b *testing.B) {
				var ours, theirs time.Duration
				timed := func(f func() error) time.Duration {
					t0 := time.Now()
					if err := f(); err != nil {
						b.Fatal(err)
					}
					return time.Since(t0)
				}
				n := 0
				for b.Loop() {
					if n%2 == 0 {
						ours += timed(c.ours)
						theirs += timed(c.theirs)
					} else {
						theirs += timed(c.theirs)
						ours += timed(c.ours)
					}
					n++
				}
				b.ReportMetric(float64(ours.Nanoseconds())/float64(n), "keygate-ns/op")
				b.ReportMetric(float64(theirs.Nanoseconds())/float64(n), "crypto-rsa-ns/op")
				b.ReportMetric(float64(ours)/float64(theirs), "keygate/crypto-rsa")
			})
		}
	}
}
