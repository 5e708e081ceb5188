package transit

import (
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time the calling thread has used.
func threadCPU(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return ts.Nano()
}

// BenchmarkOpCost measures what one item of each operation costs, relative
// to an AES-256-GCM encryption of a 64-byte input as text (the cost unit),
// so that the table in cost.go can be checked and refreshed:
//
//	go test -run '^$' -bench OpCost -benchtime 1s ./internal/transit
//
// (An RSA key's generation varies by a factor of several from one key to
// the next, with the primes' search: its mean needs more runs, as with
// -bench 'OpCost/rsa-4096/generate' -benchtime 30x.)
//
// Each result reports "cpu-ns", the CPU time of one operation, and
// "units", that over the unit's, both read from the thread's own CPU clock
// with the goroutine locked to it, so that the other work of a shared
// machine does not count (only what cache and memory share with it does).
func BenchmarkOpCost(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	e := New(Options{})
	msg := make([]byte, 64)
	unitKey := newKey(b, e, AES256GCM96, CreateOptions{})
	unitDst := make([]byte, 0, 256)
	unit := func(b *testing.B) float64 {
		const n = 50_000
		start := threadCPU(b)
		for range n {
			if _, _, err := e.AppendEncrypt(ctx, unitDst[:0], unitKey, msg, EncryptOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		return float64(threadCPU(b)-start) / n
	}
	measure := func(name string, f func() error) {
		b.Run(name, func(b *testing.B) {
			runtime.LockOSThread() // sub-benchmarks run on goroutines of their own
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			start := threadCPU(b)
			for b.Loop() {
				if err := f(); err != nil {
					b.Fatal(err)
				}
			}
			cpu := float64(threadCPU(b)-start) / float64(b.N)
			b.ReportMetric(cpu, "cpu-ns")
			b.ReportMetric(cpu/unit(b), "units")
		})
	}
	dst := make([]byte, 0, 4096)
	for _, typ := range KeyTypes() {
		k := newKey(b, e, typ, CreateOptions{})
		caps := typ.Capabilities()
		if caps.Encryption {
			measure(typ.String()+"/encrypt", func() error {
				_, _, err := e.AppendEncrypt(ctx, dst[:0], k, msg, EncryptOptions{})
				return err
			})
		}
		if caps.Decryption {
			ct, _, err := e.AppendEncrypt(ctx, nil, k, msg, EncryptOptions{})
			if err != nil {
				b.Fatal(err)
			}
			measure(typ.String()+"/decrypt", func() error {
				_, _, err := e.AppendDecrypt(ctx, dst[:0], k, ct, DecryptOptions{})
				return err
			})
		}
		if caps.Signing {
			sig, _, err := e.AppendSign(ctx, nil, k, msg, SignOptions{})
			if err != nil {
				b.Fatal(err)
			}
			measure(typ.String()+"/sign", func() error {
				_, _, err := e.AppendSign(ctx, dst[:0], k, msg, SignOptions{})
				return err
			})
			measure(typ.String()+"/verify", func() error {
				_, err := e.VerifyBytes(ctx, k, msg, sig, SignOptions{})
				return err
			})
		}
		measure(typ.String()+"/generate", func() error {
			_, err := e.CreateKey(ctx, "g", CreateOptions{Type: typ})
			return err
		})
		if typ == AES256GCM96 {
			measure(typ.String()+"/hmac", func() error {
				_, _, err := e.AppendHMAC(dst[:0], k, msg, HMACOptions{})
				return err
			})
		}
	}
	// Derived keys: a context not in the cache costs a derivation.
	for _, typ := range []KeyType{AES256GCM96, Ed25519} {
		k := newKey(b, e, typ, CreateOptions{Derived: true})
		n := 0
		next := func() []byte { n++; return strconv.AppendInt([]byte("context-"), int64(n), 10) }
		if typ == Ed25519 {
			measure(typ.String()+"/sign-derived-uncached", func() error {
				_, _, err := e.AppendSign(ctx, dst[:0], k, msg, SignOptions{Context: next()})
				return err
			})
			continue
		}
		measure(typ.String()+"/encrypt-derived-uncached", func() error {
			_, _, err := e.AppendEncrypt(ctx, dst[:0], k, msg, EncryptOptions{Context: next()})
			return err
		})
	}
}
