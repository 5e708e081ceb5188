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

// The read benchmarks: a 1 KiB secret read through the engine on SQLite,
// from the cache (hit), from the store into the cache (miss), without a
// cache, and what they are held against: the store's two queries alone
// (StoreRead) and one AES-256-GCM open with a cipher made once (ReadRaw).
// Targets: hit ≤ 1.5× ReadRaw, miss ≤ 1.5× (ReadRaw + StoreRead).

// BenchmarkReadHit reads a 1 KiB secret found in the read cache: no
// query, one open under the tenant's data key.
func BenchmarkReadHit(b *testing.B) {
	k := newKit(b)
	if _, err := k.e.Write(ctx, def, "bench/a", kib, nil); err != nil {
		b.Fatal(err)
	}
	if _, err := k.e.Read(ctx, def, "bench/a", 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(kib)))
	for b.Loop() {
		if _, err := k.e.Read(ctx, def, "bench/a", 0); err != nil {
			b.Fatal(err)
		}
	}
	if s := k.e.CacheStats(); s.Misses != 1 {
		b.Fatalf("%d misses, want the first read's alone", s.Misses)
	}
}

// BenchmarkReadMiss reads a 1 KiB secret the cache does not hold (it is
// dropped before each read): two store reads (metadata and value,
// SQLite), two opens under the tenant's data key, the JSON of the
// metadata, and the entry put in the cache.
func BenchmarkReadMiss(b *testing.B) {
	k := newKit(b)
	if _, err := k.e.Write(ctx, def, "bench/a", kib, nil); err != nil {
		b.Fatal(err)
	}
	id := pathID{def, "bench/a"}
	b.ReportAllocs()
	b.SetBytes(int64(len(kib)))
	for b.Loop() {
		k.e.cache.drop(id)
		if _, err := k.e.Read(ctx, def, "bench/a", 0); err != nil {
			b.Fatal(err)
		}
	}
	if s := k.e.CacheStats(); s.Hits != 0 {
		b.Fatalf("%d hits, want none", s.Hits)
	}
}

// BenchmarkReadNoCache reads a 1 KiB secret with the cache off (as
// before there was one).
func BenchmarkReadNoCache(b *testing.B) {
	k := newKitWith(b, Options{CacheBytes: -1})
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

// BenchmarkStoreRead is the store's part of a miss: the same two queries
// (the path's metadata row, the version's value row), nothing opened.
func BenchmarkStoreRead(b *testing.B) {
	k := newKit(b)
	if _, err := k.e.Write(ctx, def, "bench/a", kib, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(kib)))
	for b.Loop() {
		row, err := k.st.GetSecret(ctx, def, "bench/a")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := k.st.GetSecretValue(ctx, def, "bench/a", row.CurrentVersion); err != nil {
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
