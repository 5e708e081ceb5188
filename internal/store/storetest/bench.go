package storetest

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// BenchGetClient measures GetClient of one client among 1,000 on s, an
// empty store.
func BenchGetClient(b *testing.B, s store.Store) {
	ctx := b.Context()
	for i := range 1000 {
		if err := s.CreateClient(ctx, client(clientID(i), t0)); err != nil {
			b.Fatal(err)
		}
	}
	id := clientID(500)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.GetClient(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

func clientID(i int) string { return fmt.Sprintf("client-%04d", i) }

// BenchRotateRefreshToken measures RotateRefreshToken on s, an empty
// store: each iteration spends the token the previous one stored.
func BenchRotateRefreshToken(b *testing.B, s store.Store) {
	ctx := b.Context()
	digest := func(i uint64) []byte {
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], i)
		return Digest(string(buf[:]))
	}
	first := refresh("", "bench", t0)
	first.Digest = digest(0)
	first.ExpiresAt = t0.Add(1000 * time.Hour)
	if err := s.CreateRefreshToken(ctx, first); err != nil {
		b.Fatal(err)
	}
	next := first
	now := t0
	var i uint64
	b.ReportAllocs()
	for b.Loop() {
		i++
		next.Digest = digest(i)
		now = now.Add(time.Millisecond)
		next.IssuedAt = now
		if _, err := s.RotateRefreshToken(ctx, "iss", digest(i-1), next, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchGetTransitKeyVersion measures GetTransitKeyVersion of one version
// of a key with 20, among 100 keys, on s, an empty store: what a node
// reads on meeting a ciphertext of a version newer than it knows.
func BenchGetTransitKeyVersion(b *testing.B, s store.Store) {
	ctx := b.Context()
	for i := range 100 {
		name := fmt.Sprintf("key-%03d", i)
		k, first := transitKey(store.DefaultTenant, name, t0)
		if err := s.CreateTransitKey(ctx, k, first); err != nil {
			b.Fatal(err)
		}
		for v := 2; v <= 20; v++ {
			if err := s.AddTransitKeyVersion(ctx, keyVersion(store.DefaultTenant, name, v, t0)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.GetTransitKeyVersion(ctx, store.DefaultTenant, "key-050", 17); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchAppendAudit measures AppendAudit of batches of 1 and of 100
// entries of about 200 bytes, each on a new store from open, which it
// closes; it reports the time per entry too.
func BenchAppendAudit(b *testing.B, open func(b *testing.B) store.Store) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			s := open(b)
			defer s.Close()
			ctx := b.Context()
			batch := make([]store.AuditEntry, n)
			line := auditEntry("bench", 0).Line
			var seq uint64
			b.ReportAllocs()
			for b.Loop() {
				for i := range batch {
					batch[i] = store.AuditEntry{Node: "bench", Seq: seq, Line: line}
					seq++
				}
				if err := s.AppendAudit(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(seq), "ns/entry")
		})
	}
}

// BenchPutSecret measures PutSecret on s, an empty store: each iteration
// writes the next version of one path, a 1 KiB sealed value, and once ten
// are kept erases the oldest, as a write under max_versions does.
func BenchPutSecret(b *testing.B, s store.Store) {
	ctx := b.Context()
	m := secretMeta(store.DefaultTenant, "bench/path", 0, t0)
	value := make([]byte, 1024)
	b.ReportAllocs()
	for b.Loop() {
		v := m.CurrentVersion + 1
		var erase []int
		if v > 10 {
			erase = []int{v - 10}
		}
		m.CurrentVersion, m.OldestVersion = v, max(1, v-9)
		rev, err := s.PutSecret(ctx, m, &store.SecretValue{Version: v, Sealed: value, CreatedAt: t0}, erase)
		if err != nil {
			b.Fatal(err)
		}
		m.Revision = rev
	}
}
