package transit

// Benchmarks, each beside the raw primitive it wraps, in the same run:
//
//	go test -run '^$' -bench . -benchmem -count 6 ./internal/transit
//
// "raw" is the standard library alone with everything cached that the
// engine caches (the AEAD, the parsed key); "binary" is the engine without
// the text encoding (SealRaw, OpenRaw); "text" adds the "vault:vN:" + base64
// text (AppendEncrypt, AppendDecrypt). The engine uses crypto/rand for
// nonces, as does raw.

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"runtime"
	"sync"
	"testing"
)

func benchEngine(b *testing.B) (*Engine, *Key, cipher.AEAD) {
	b.Helper()
	e := New(Options{})
	k := newKey(b, e, AES256GCM96, CreateOptions{})
	blk, _ := aes.NewCipher(k.latest().key)
	raw, _ := cipher.NewGCM(blk)
	return e, k, raw
}

var benchSizes = []struct {
	name string
	n    int
}{{"64B", 64}, {"4KiB", 4096}}

func BenchmarkEncrypt(b *testing.B) {
	e, k, raw := benchEngine(b)
	for _, sz := range benchSizes {
		pt := make([]byte, sz.n)
		dst := make([]byte, 0, 2*sz.n+256)
		b.Run(sz.name+"/raw", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(sz.n))
			for b.Loop() {
				out := dst[:12]
				if _, err := rand.Read(out); err != nil {
					b.Fatal(err)
				}
				raw.Seal(out, out, pt, nil)
			}
		})
		b.Run(sz.name+"/binary", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(sz.n))
			for b.Loop() {
				if _, _, err := e.SealRaw(ctx, dst[:0], k, pt, EncryptOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sz.name+"/text", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(sz.n))
			for b.Loop() {
				if _, _, err := e.AppendEncrypt(ctx, dst[:0], k, pt, EncryptOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecrypt(b *testing.B) {
	e, k, raw := benchEngine(b)
	for _, sz := range benchSizes {
		pt := make([]byte, sz.n)
		bin, _, _ := e.SealRaw(ctx, nil, k, pt, EncryptOptions{})
		text, _, _ := e.AppendEncrypt(ctx, nil, k, pt, EncryptOptions{})
		dst := make([]byte, 0, sz.n+64)
		b.Run(sz.name+"/raw", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(sz.n))
			for b.Loop() {
				if _, err := raw.Open(dst[:0], bin[:12], bin[12:], nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sz.name+"/binary", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(sz.n))
			for b.Loop() {
				if _, err := e.OpenRaw(ctx, dst[:0], k, 1, bin, DecryptOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sz.name+"/text", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(sz.n))
			for b.Loop() {
				if _, _, err := e.AppendDecrypt(ctx, dst[:0], k, text, DecryptOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncryptBatch1000 encrypts 1,000 items of 64 bytes: raw spreads
// the Seals over the same number of goroutines as the engine's workers
// (GOMAXPROCS), each writing into a preallocated buffer; the engine returns
// the texts. items/s is the figure to compare.
func BenchmarkEncryptBatch1000(b *testing.B) {
	e, k, raw := benchEngine(b)
	const n = 1000
	items := make([]EncryptItem, n)
	for i := range items {
		items[i].Plaintext = make([]byte, 64)
	}
	workers := runtime.GOMAXPROCS(0)
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, 0, 12+64+16)
	}
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < n; i += workers {
						out := bufs[i][:12]
						rand.Read(out)
						raw.Seal(out, out, items[i].Plaintext, nil)
					}
				}()
			}
			wg.Wait()
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "items/s")
	})
	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := e.EncryptBatch(ctx, k, items, Caller{})
			if err != nil || res[n-1].Err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "items/s")
	})
	// As the HTTP layer would call it, with pooled result and text buffers.
	b.Run("engine-reuse", func(b *testing.B) {
		b.ReportAllocs()
		var (
			res []EncryptResult
			buf []byte
			err error
		)
		for b.Loop() {
			res, buf, err = e.EncryptBatchInto(ctx, k, items, Caller{}, res, buf)
			if err != nil || res[n-1].Err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "items/s")
	})
}

func BenchmarkSign(b *testing.B) {
	e := New(Options{})
	msg := []byte("a message of a typical size, say a JWT's signing input or an API request body")
	dst := make([]byte, 0, 1024)
	ek := newKey(b, e, Ed25519, CreateOptions{})
	pk := newKey(b, e, ECDSAP256, CreateOptions{})
	rk := newKey(b, e, RSA2048, CreateOptions{})
	for _, tc := range []struct {
		name string
		k    *Key
		raw  func()
	}{
		{"ed25519", ek, func() { ed25519.Sign(ed25519.PrivateKey(ek.latest().key), msg) }},
		{"ecdsa-p256", pk, func() {
			d := sha256.Sum256(msg)
			if _, err := ecdsa.SignASN1(rand.Reader, pk.latest().ec, d[:]); err != nil {
				b.Fatal(err)
			}
		}},
		{"rsa-2048", rk, func() {
			d := sha256.Sum256(msg)
			if _, err := rsa.SignPSS(rand.Reader, rk.latest().rsa, crypto.SHA256, d[:], nil); err != nil {
				b.Fatal(err)
			}
		}},
	} {
		b.Run(tc.name+"/raw", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tc.raw()
			}
		})
		b.Run(tc.name+"/engine", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := e.AppendSign(ctx, dst[:0], tc.k, msg, SignOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkHMAC(b *testing.B) {
	e, k, _ := benchEngine(b)
	msg := make([]byte, 64)
	dst := make([]byte, 0, 128)
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m := hmac.New(sha256.New, k.latest().hmacKey)
			m.Write(msg)
			m.Sum(dst[:0])
		}
	})
	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := e.AppendHMAC(dst[:0], k, msg, HMACOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEncryptAllocations pins the hot paths' allocation budget: with room in
// dst, encrypting and decrypting with a non-derived AEAD key, in binary or as
// text, and computing an HMAC, allocate nothing beyond what the primitive
// itself allocates (AES-GCM: nothing).
func TestEncryptAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race (.ci/run runs them)")
	}
	e := New(Options{})
	k := newKey(t, e, AES256GCM96, CreateOptions{})
	raw := rawAEAD(t, AES256GCM96, k.latest().key)
	pt := make([]byte, 4096)
	dst := make([]byte, 0, 3*len(pt))
	nonce := make([]byte, 12)
	sealed := raw.Seal(nil, nonce, pt, nil)
	text, _, _ := e.AppendEncrypt(ctx, nil, k, pt, EncryptOptions{})
	bin, _, _ := e.SealRaw(ctx, nil, k, pt, EncryptOptions{})
	primitive := testing.AllocsPerRun(100, func() {
		rand.Read(nonce)
		raw.Seal(dst[:0], nonce, pt, nil)
		if _, err := raw.Open(dst[:0], nonce, sealed, nil); err == nil {
			t.Fatal("opened with the wrong nonce")
		}
	})
	items := make([]EncryptItem, 1000)
	for i := range items {
		items[i].Plaintext = pt[:64]
	}
	var (
		res []EncryptResult
		buf []byte
	)
	for _, tc := range []struct {
		name string
		f    func() error
	}{
		{"SealRaw", func() error { _, _, err := e.SealRaw(ctx, dst[:0], k, pt, EncryptOptions{}); return err }},
		{"AppendEncrypt", func() error { _, _, err := e.AppendEncrypt(ctx, dst[:0], k, pt, EncryptOptions{}); return err }},
		{"OpenRaw", func() error { _, err := e.OpenRaw(ctx, dst[:0], k, 1, bin, DecryptOptions{}); return err }},
		{"AppendDecrypt", func() error { _, _, err := e.AppendDecrypt(ctx, dst[:0], k, text, DecryptOptions{}); return err }},
		{"AppendHMAC", func() error { _, _, err := e.AppendHMAC(dst[:0], k, pt, HMACOptions{}); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours := testing.AllocsPerRun(100, func() {
				if err := tc.f(); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("primitive %.0f allocs, engine %.0f", primitive, ours)
			if ours > primitive {
				t.Errorf("%s allocates %.0f, primitive %.0f", tc.name, ours, primitive)
			}
		})
	}
	// A batch with reused buffers allocates for its goroutines only,
	// nothing per item.
	t.Run("EncryptBatchInto", func(t *testing.T) {
		ours := testing.AllocsPerRun(20, func() {
			var err error
			if res, buf, err = e.EncryptBatchInto(ctx, k, items, Caller{}, res, buf); err != nil || res[999].Err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("1,000 items: %.0f allocs", ours)
		if ours > 10 {
			t.Errorf("a batch of 1,000 allocates %.0f objects", ours)
		}
	})
}

// BenchmarkBase64 compares the package's codec with encoding/base64 on a
// 4 KiB payload's nonce‖ciphertext‖tag.
func BenchmarkBase64(b *testing.B) {
	src := make([]byte, 12+4096+16)
	dst := make([]byte, 0, 8192)
	text := appendB64(nil, src)
	b.Run("encode/std", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			base64.StdEncoding.AppendEncode(dst[:0], src)
		}
	})
	b.Run("encode/transit", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			appendB64(dst[:0], src)
		}
	})
	b.Run("decode/std", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, err := base64.StdEncoding.Strict().Decode(dst[:cap(dst)], text); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/transit", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, ok := appendUnB64(dst[:0], text); !ok {
				b.Fatal("decode")
			}
		}
	})
}
