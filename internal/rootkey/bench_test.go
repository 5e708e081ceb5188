package rootkey

import (
	"fmt"
	"path/filepath"
	"testing"
)

func benchRing(b *testing.B) *Keyring {
	k, err := New(Options{Root: newKey(b)})
	if err != nil {
		b.Fatal(err)
	}
	return k
}

func BenchmarkEncrypt(b *testing.B) {
	for _, n := range []int{64, 1024, 16 << 10} {
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			k := benchRing(b)
			pt, aad := make([]byte, n), []byte("signing-key:k1")
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := k.Encrypt(pt, aad); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecrypt(b *testing.B) {
	for _, n := range []int{64, 1024, 16 << 10} {
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			k := benchRing(b)
			aad := []byte("signing-key:k1")
			ct, _ := k.Encrypt(make([]byte, n), aad)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := k.Decrypt(ct, aad); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecryptParallel: Decrypt takes no lock, so it scales with cores.
func BenchmarkDecryptParallel(b *testing.B) {
	k := benchRing(b)
	aad := []byte("signing-key:k1")
	ct, _ := k.Encrypt(make([]byte, 1024), aad)
	b.SetBytes(1024)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := k.Decrypt(ct, aad); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkRewrap(b *testing.B) {
	k := benchRing(b)
	ct, _ := k.Encrypt(make([]byte, 1024), nil)
	if err := k.Rotate(newKey(b)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Rewrap(ct); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDerivePassphrase is the cost of one unseal (and of one guess
// for an attacker with the data directory): Argon2id with DefaultArgon2,
// and with OWASP's minimum for comparison.
func BenchmarkDerivePassphrase(b *testing.B) {
	for _, tc := range []struct {
		name string
		p    Argon2Params
	}{
		{"default-64MiB-t3-p4", DefaultArgon2()},
		{"owasp-min-19MiB-t2-p1", minArgon2},
	} {
		b.Run(tc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "keyring.json")
			root, err := initPassphrase(path, []byte(testPassphrase), nil, tc.p, true)
			if err != nil {
				b.Fatal(err)
			}
			root.Destroy()
			h, err := ReadHeader(path)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				k, err := h.Derive([]byte(testPassphrase))
				if err != nil {
					b.Fatal(err)
				}
				k.Destroy()
			}
		})
	}
}
