package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
)

// kib is a secret of 1 KiB as JSON.
var kib = json.RawMessage(`{"k":"` + strings.Repeat("x", 1024-8) + `"}`)

// BenchmarkRead reads a 1 KiB secret: two store reads (metadata and
// value, SQLite), two opens under the tenant's data key, the JSON of
// the metadata.
func BenchmarkRead(b *testing.B) {
	k := newKit(b)
	if _, err := k.e.Write(ctx, def, "bench/a", kib, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(kib)))
	for b.Loop() {
		if _, err := k.e.Read(ctx, def, "bench/a", 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadRaw is the floor beside BenchmarkRead: one AES-256-GCM
// open of 1 KiB with a cipher made once.
func BenchmarkReadRaw(b *testing.B) {
	key := make([]byte, 32)
	rand.Read(key)
	block, err := aes.NewCipher(key)
	if err != nil {
		b.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		b.Fatal(err)
	}
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	ad := valueAD(def, "bench/a", 1)
	sealed := aead.Seal(nil, nonce, kib, ad)
	b.ReportAllocs()
	b.SetBytes(int64(len(kib)))
	for b.Loop() {
		if _, err := aead.Open(nil, nonce, sealed, ad); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWrite writes a new 1 KiB version (SQLite, synchronous=FULL).
func BenchmarkWrite(b *testing.B) {
	k := newKit(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(kib)))
	for b.Loop() {
		if _, err := k.e.Write(ctx, def, "bench/a", kib, nil); err != nil {
			b.Fatal(err)
		}
	}
}
