package jose

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"testing"
	"time"
)

// es256BenchKey returns a P-256 key, a digest, its signature as r‖s and as
// DER, and a verifier with its table built.
func es256BenchKey(b *testing.B) (pub *ecdsa.PublicKey, digest, sig, der []byte, v *P256Verifier) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	d := sha256.Sum256([]byte("the signing input of a token"))
	r, s := signP256(b, priv, d[:], true)
	sig = append(r, s...)
	der, ok := p1363ToDER(nil, sig, 32)
	if !ok {
		b.Fatal("p1363ToDER")
	}
	v = NewP256Verifier(&priv.PublicKey)
	v.table.Store(newP256Table(v.q))
	return &priv.PublicKey, d[:], sig, der, v
}

// BenchmarkES256Verify times P256Verifier (with its table, and without one
// as on a key's first use) and crypto/ecdsa on the same key, digest and
// signature, with allocation counts; the ratio to read is
// BenchmarkES256VerifyPaired's.
//
//	go test -run '^$' -bench 'BenchmarkES256Verify/' -count 10 ./jose
func BenchmarkES256Verify(b *testing.B) {
	pub, digest, sig, der, v := es256BenchKey(b)
	direct := NewP256Verifier(pub)
	direct.building.Store(true) // never builds a table
	cases := []struct {
		name   string
		verify func() bool
	}{
		{"keygate", func() bool { return v.VerifyP1363(digest, sig) }},
		{"keygate-no-table", func() bool { return direct.VerifyP1363(digest, sig) }},
		{"crypto-ecdsa", func() bool { return ecdsa.VerifyASN1(pub, digest, der) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !c.verify() {
					b.Fatal("verification failed")
				}
			}
		})
	}
}

// BenchmarkES256VerifyPaired times P256Verifier (table built) and
// ecdsa.VerifyASN1 call by call, in alternating order, within each
// iteration, and reports each one's mean time and their ratio: on a shared
// machine whose speed drifts, both sides always see the same moment. The
// no-table sub-benchmark is a key's first use (and every use of a key over
// the bound on tables).
//
//	go test -run '^$' -bench 'BenchmarkES256VerifyPaired' -cpu 1 -count 10 ./jose
func BenchmarkES256VerifyPaired(b *testing.B) {
	pub, digest, sig, der, v := es256BenchKey(b)
	direct := NewP256Verifier(pub)
	direct.building.Store(true)
	for _, c := range []struct {
		name string
		ours func() bool
	}{
		{"table", func() bool { return v.VerifyP1363(digest, sig) }},
		{"no-table", func() bool { return direct.VerifyP1363(digest, sig) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			theirs := func() bool { return ecdsa.VerifyASN1(pub, digest, der) }
			var tOurs, tTheirs time.Duration
			timed := func(f func() bool) time.Duration {
				t0 := time.Now()
				if !f() {
					b.Fatal("verification failed")
				}
				return time.Since(t0)
			}
			n := 0
			for b.Loop() {
				if n%2 == 0 {
					tOurs += timed(c.ours)
					tTheirs += timed(theirs)
				} else {
					tTheirs += timed(theirs)
					tOurs += timed(c.ours)
				}
				n++
			}
			b.ReportMetric(float64(tOurs.Nanoseconds())/float64(n), "keygate-ns/op")
			b.ReportMetric(float64(tTheirs.Nanoseconds())/float64(n), "crypto-ecdsa-ns/op")
			b.ReportMetric(float64(tOurs)/float64(tTheirs), "keygate/crypto-ecdsa")
		})
	}
}

// BenchmarkP256TableBuild is the one-time cost of a key's table.
//
//	go test -run '^$' -bench 'BenchmarkP256TableBuild' -count 5 ./jose
func BenchmarkP256TableBuild(b *testing.B) {
	_, _, _, _, v := es256BenchKey(b)
	b.ReportAllocs()
	for b.Loop() {
		newP256Table(v.q)
	}
}
