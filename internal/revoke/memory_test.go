package revoke

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

func TestMemoryRevoked(t *testing.T) {
	m := NewMemory()
	m.RevokeID("iss-a", "jti-1", t0.Add(time.Hour))
	m.RevokeSubject("iss-a", "alice", t0)

	tests := []struct {
		name             string
		issuer, jti, sub string
		iat              time.Time
		want             bool
	}{
		{"revoked jti", "iss-a", "jti-1", "bob", t0, true},
		{"revoked jti without subject", "iss-a", "jti-1", "", time.Time{}, true},
		{"other jti", "iss-a", "jti-2", "bob", t0, false},
		{"same jti other issuer", "iss-b", "jti-1", "bob", t0, false},
		{"subject issued before T", "iss-a", "jti-9", "alice", t0.Add(-time.Second), true},
		{"subject issued at T", "iss-a", "jti-9", "alice", t0, false},
		{"subject issued after T", "iss-a", "jti-9", "alice", t0.Add(time.Second), false},
		{"subject without iat fails closed", "iss-a", "", "alice", time.Time{}, true},
		{"same subject other issuer", "iss-b", "", "alice", t0.Add(-time.Hour), false},
		{"nothing to identify", "iss-a", "", "", time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := m.Revoked(tt.issuer, tt.jti, tt.sub, tt.iat); got != tt.want {
				t.Errorf("Revoked(%q, %q, %q, %v) = %v, want %v", tt.issuer, tt.jti, tt.sub, tt.iat, got, tt.want)
			}
		})
	}
}

func TestMemoryZeroValue(t *testing.T) {
	var m Memory
	if m.Revoked("i", "j", "s", t0) {
		t.Fatal("empty checker revoked a token")
	}
	if ids, subs := m.Len(); ids != 0 || subs != 0 {
		t.Fatalf("Len = %d, %d", ids, subs)
	}
	if n := m.Sweep(t0); n != 0 {
		t.Fatalf("Sweep dropped %d from an empty checker", n)
	}
}

func TestMemoryLaterTimeWins(t *testing.T) {
	m := NewMemory()
	m.RevokeSubject("i", "s", t0)
	m.RevokeSubject("i", "s", t0.Add(-time.Hour)) // earlier: ignored
	if !m.Revoked("i", "", "s", t0.Add(-time.Minute)) {
		t.Error("an earlier RevokeSubject narrowed the revocation")
	}
	m.RevokeSubject("i", "s", t0.Add(time.Hour))
	if !m.Revoked("i", "", "s", t0.Add(time.Minute)) {
		t.Error("a later RevokeSubject did not widen the revocation")
	}

	m.RevokeID("i", "j", t0.Add(2*time.Hour))
	m.RevokeID("i", "j", t0.Add(time.Hour)) // earlier: ignored
	if n := m.Sweep(t0.Add(90 * time.Minute)); n != 0 {
		t.Errorf("Sweep dropped %d entries; the later until should keep it", n)
	}
}

// TestMemorySweepSubjectsUntil: a subject revocation kept until a time
// (tokens of an issuer that live longer than the retention) outlives the
// retention cutoff until then; a later plain revocation of the subject
// does not shorten it, and one kept longer lengthens it.
func TestMemorySweepSubjectsUntil(t *testing.T) {
	m := NewMemory()
	m.RevokeSubjectUntil("idp", "bob", t0.Add(-48*time.Hour), t0.Add(24*time.Hour))
	m.RevokeSubject("idp", "bob", t0.Add(-47*time.Hour)) // later time, no until
	m.RevokeSubject("idp", "carol", t0.Add(-48*time.Hour))
	if n := m.SweepSubjects(t0.Add(-24*time.Hour), t0); n != 1 {
		t.Fatalf("SweepSubjects dropped %d, want 1 (carol)", n)
	}
	if !m.Revoked("idp", "", "bob", t0.Add(-47*time.Hour-time.Second)) {
		t.Error("a subject revocation kept until tomorrow was swept, or lost its later time")
	}
	m.RevokeSubjectUntil("idp", "bob", t0.Add(-48*time.Hour), t0.Add(48*time.Hour))
	if n := m.SweepSubjects(t0.Add(-24*time.Hour), t0.Add(24*time.Hour)); n != 0 {
		t.Fatalf("SweepSubjects at the first until dropped %d, want 0 (kept longer since)", n)
	}
	if n := m.SweepSubjects(t0.Add(-24*time.Hour), t0.Add(48*time.Hour)); n != 1 {
		t.Fatalf("SweepSubjects at the until dropped %d, want 1", n)
	}
}

func TestMemorySweep(t *testing.T) {
	m := NewMemory()
	m.RevokeID("i", "short", t0.Add(time.Minute))
	m.RevokeID("i", "long", t0.Add(time.Hour))
	m.RevokeSubject("i", "old", t0.Add(-48*time.Hour))
	m.RevokeSubject("i", "new", t0)

	if n := m.Sweep(t0.Add(time.Minute)); n != 1 {
		t.Fatalf("Sweep dropped %d, want 1 (until is exclusive)", n)
	}
	if m.Revoked("i", "short", "", time.Time{}) {
		t.Error("swept ID still revoked")
	}
	if !m.Revoked("i", "long", "", time.Time{}) {
		t.Error("unexpired ID swept")
	}
	if n := m.SweepSubjects(t0.Add(-24*time.Hour), t0); n != 1 {
		t.Fatalf("SweepSubjects dropped %d, want 1", n)
	}
	if ids, subs := m.Len(); ids != 1 || subs != 1 {
		t.Fatalf("Len = %d, %d; want 1, 1", ids, subs)
	}
	if !m.Revoked("i", "", "new", t0.Add(-time.Second)) {
		t.Error("recent subject revocation swept")
	}
}

// TestMemorySnapshotIsolation checks copy-on-write: a snapshot taken before
// a change never sees it.
func TestMemorySnapshotIsolation(t *testing.T) {
	m := NewMemory()
	m.RevokeID("i", "a", t0)
	before := m.load()
	m.RevokeID("i", "b", t0)
	m.Sweep(t0.Add(time.Hour))
	if len(before.ids) != 1 {
		t.Fatalf("old snapshot changed: %d ids", len(before.ids))
	}
}

func TestMemoryUpdateBatch(t *testing.T) {
	m := NewMemory()
	m.RevokeID("i", "before", t0.Add(time.Hour))
	old := m.load()
	m.Update(func(b *Batch) {
		for i := range 100 {
			b.RevokeID("i", fmt.Sprint("j", i), t0.Add(time.Hour))
		}
		b.RevokeSubject("i", "s", t0)
		b.RevokeID("i", "before", t0) // earlier: ignored
	})
	if ids, subs := m.Len(); ids != 101 || subs != 1 {
		t.Fatalf("Len = %d, %d; want 101, 1", ids, subs)
	}
	if len(old.ids) != 1 || old.subjects != nil {
		t.Fatal("Update wrote into the published snapshot")
	}
	cur := m.load()
	m.Update(func(b *Batch) { b.RevokeID("i", "before", t0) }) // no change
	if m.load() != cur {
		t.Error("an Update that changed nothing published a new snapshot")
	}
}

func TestMemoryConcurrent(t *testing.T) {
	m := NewMemory()
	const writers, readers, n = 4, 4, 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				m.RevokeID("i", fmt.Sprintf("w%d-%d", w, i), t0.Add(time.Duration(i)*time.Second))
				m.RevokeSubject("i", fmt.Sprintf("s%d", i%10), t0)
				if i%50 == 0 {
					m.Sweep(t0.Add(10 * time.Second))
				}
			}
		}()
	}
	var rg sync.WaitGroup
	for range readers {
		rg.Add(1)
		go func() {
			defer rg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				m.Revoked("i", "w0-199", "s3", t0.Add(-time.Second))
			}
		}()
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	for w := range writers {
		if !m.Revoked("i", fmt.Sprintf("w%d-%d", w, n-1), "", time.Time{}) {
			t.Errorf("writer %d's last revocation lost", w)
		}
	}
	if ids, subs := m.Len(); subs != 10 || ids < writers*(n-11) {
		t.Errorf("Len = %d ids, %d subjects", ids, subs)
	}
}

func TestMemoryRevokedAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	m := NewMemory()
	for i := range 1000 {
		m.RevokeID("iss", fmt.Sprint("jti-", i), t0.Add(time.Hour))
		m.RevokeSubject("iss", fmt.Sprint("sub-", i), t0)
	}
	jti, sub := "jti-not-revoked", "sub-500"
	allocs := testing.AllocsPerRun(1000, func() {
		if m.Revoked("iss", jti, sub, t0) {
			t.Fatal("unexpectedly revoked")
		}
		if !m.Revoked("iss", "jti-7", sub, t0) {
			t.Fatal("not revoked")
		}
	})
	if allocs != 0 {
		t.Fatalf("Revoked allocates %v times per call, want 0", allocs)
	}
	var n Nop
	if a := testing.AllocsPerRun(100, func() { n.Revoked("i", "j", "s", t0) }); a != 0 {
		t.Fatalf("Nop.Revoked allocates %v", a)
	}
}

func BenchmarkMemoryRevoked(b *testing.B) {
	m := NewMemory()
	m.Update(func(batch *Batch) {
		for i := range 10000 {
			batch.RevokeID("iss", fmt.Sprint("jti-", i), t0.Add(time.Hour))
			batch.RevokeSubject("iss", fmt.Sprint("sub-", i), t0)
		}
	})
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Revoked("iss", "jti-x", "sub-x", t0)
		}
	})
}
