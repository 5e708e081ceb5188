package jose

import (
	"crypto/hmac"
	"crypto/sha256"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkHS256VerifyPaired times a whole Verifier.Verify of the benchmark
// token (testPayload under a {"alg","kid","typ"} header, checked for
// signature, iss, aud and exp as in BenchmarkVerify) against the raw
// primitive over the same signing input, in alternating blocks within each
// iteration, and reports their ratio. On a shared machine whose speed drifts
// by 20% or more within seconds, BenchmarkVerify's separate HS256/raw and
// HS256/keygate sub-benchmarks can land in different moments; here both
// sides see the same moment, so "keygate/raw" is the figure to read.
//
// "raw" is what BENCHMARKS.md and rawVerifier call raw: one HMAC-SHA256
// state made once and Reset for every call, Write of the signing input, Sum
// into a stack buffer and hmac.Equal with the signature, which was
// base64url-decoded once beforehand. "raw+b64" adds decoding the 43-character
// signature on every call (what any verifier handed a token string must do);
// it is reported as a second ratio, "keygate/raw+b64", for readers who count
// that decoding as part of the primitive.
//
// Each side runs blocks of pairedBlock calls between two clock readings, so
// the clock's own cost (tens of ns, the same on both sides) is spread over
// the block instead of narrowing the ratio. "keygate/raw" divides the total
// times, everything included (garbage collection is charged to the
// allocating side, as assists); "keygate/raw-median" divides the median
// block times, which the odd block that another process preempted for a
// few milliseconds cannot move. On a busy shared machine read the median;
// the sums show what garbage collection adds on top.
//
//	go test -run '^$' -bench '^BenchmarkHS256VerifyPaired$' -count 5 -cpu 1 ./jose
func BenchmarkHS256VerifyPaired(b *testing.B) {
	const pairedBlock = 16
	s := testSigner(b, HS256)
	tok, err := s.Sign(testPayload)
	if err != nil {
		b.Fatal(err)
	}
	v, err := NewVerifier(s.Key(), []Alg{HS256}, Expected{Issuer: benchIss, Audience: []string{benchAud},
		Require: []string{"exp"}}, WithClock(benchClock))
	if err != nil {
		b.Fatal(err)
	}
	secret := privateKeys(b)[HS256].([]byte)
	dot := strings.LastIndexByte(tok, '.')
	msg, sigText := []byte(tok[:dot]), tok[dot+1:]
	sig, err := b64.DecodeString(sigText)
	if err != nil {
		b.Fatal(err)
	}
	h := hmac.New(sha256.New, secret)
	var sum [sha256.Size]byte
	raw := func() bool {
		h.Reset()
		h.Write(msg)
		return hmac.Equal(h.Sum(sum[:0]), sig)
	}
	var sigBuf [sha256.Size]byte
	rawB64 := func() bool {
		if !decodeB64(sigBuf[:], sigText) {
			return false
		}
		h.Reset()
		h.Write(msg)
		return hmac.Equal(h.Sum(sum[:0]), sigBuf[:])
	}
	ours := func() bool {
		_, err := v.Verify(tok)
		return err == nil
	}
	var tOurs, tRaw, tB64 []time.Duration
	block := func(f func() bool, acc *[]time.Duration) {
		t0 := time.Now()
		ok := true
		for range pairedBlock {
			ok = f() && ok
		}
		*acc = append(*acc, time.Since(t0))
		if !ok {
			b.Fatal("verification failed")
		}
	}
	n := 0
	for b.Loop() {
		switch n % 3 {
		case 0:
			block(ours, &tOurs)
			block(raw, &tRaw)
			block(rawB64, &tB64)
		case 1:
			block(raw, &tRaw)
			block(rawB64, &tB64)
			block(ours, &tOurs)
		default:
			block(rawB64, &tB64)
			block(ours, &tOurs)
			block(raw, &tRaw)
		}
		n++
	}
	total := func(d []time.Duration) (t float64) {
		for _, x := range d {
			t += float64(x)
		}
		return t
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2])
	}
	calls := float64(n * pairedBlock)
	b.ReportMetric(total(tOurs)/calls, "keygate-ns/call")
	b.ReportMetric(total(tRaw)/calls, "raw-ns/call")
	b.ReportMetric(total(tOurs)/total(tRaw), "keygate/raw")
	b.ReportMetric(total(tOurs)/total(tB64), "keygate/raw+b64")
	b.ReportMetric(median(tOurs)/median(tRaw), "keygate/raw-median")
	b.ReportMetric(median(tOurs)/median(tB64), "keygate/raw+b64-median")
}
