package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

// shardOf returns the shard key falls in.
func (l *Local) shardOf(key string) uint64 { return shardIndex(maphash.String(l.seed, key)) }

// clock is a settable clock for Local.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := new(clock)
	c.ns.Store(t0.UnixNano())
	return c
}
func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *clock) local(t testing.TB, l Limit, maxKeys int) *Local {
	t.Helper()
	lim, err := NewLocal(LocalConfig{Limit: l, MaxKeys: maxKeys, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// mustAllow and mustDeny check one decision.
func mustAllow(t testing.TB, l Limiter, key string) {
	t.Helper()
	ok, wait, err := l.Allow(context.Background(), key)
	if err != nil || !ok || wait != 0 {
		t.Fatalf("Allow(%q) = %v, %v, %v; want allowed", key, ok, wait, err)
	}
}

func mustDeny(t testing.TB, l Limiter, key string) time.Duration {
	t.Helper()
	ok, wait, err := l.Allow(context.Background(), key)
	if err != nil || ok || wait <= 0 {
		t.Fatalf("Allow(%q) = %v, %v, %v; want denied with a wait", key, ok, wait, err)
	}
	return wait
}

func TestLocalBurstThenRate(t *testing.T) {
	c := newClock()
	l := c.local(t, Limit{Rate: 10, Burst: 5}, 0)
	for range 5 {
		mustAllow(t, l, "k")
	}
	if wait := mustDeny(t, l, "k"); wait != 100*time.Millisecond {
		t.Errorf("retryAfter = %v, want 100ms (1/rate)", wait)
	}
	mustDeny(t, l, "k") // a denial costs nothing...
	c.Advance(99 * time.Millisecond)
	if wait := mustDeny(t, l, "k"); wait != time.Millisecond {
		t.Errorf("retryAfter = %v, want 1ms", wait)
	}
	c.Advance(time.Millisecond) // ...so exactly one interval later one passes
	mustAllow(t, l, "k")
	mustDeny(t, l, "k")
	mustAllow(t, l, "other") // keys are independent

	c.Advance(500 * time.Millisecond) // a full bucket again, and no more
	for range 5 {
		mustAllow(t, l, "k")
	}
	mustDeny(t, l, "k")
	c.Advance(time.Hour)
	for range 5 {
		mustAllow(t, l, "k")
	}
	mustDeny(t, l, "k")
}

// TestLocalRate checks the long-run rate: polled every millisecond for
// 9.999 s at 7/s with burst 3, 3 pass at once and one more every 1/7 s
// from then on: 3 + 69.
func TestLocalRate(t *testing.T) {
	c := newClock()
	l := c.local(t, Limit{Rate: 7, Burst: 3}, 0)
	passed := 0
	for range 10_000 {
		if ok, _, _ := l.Allow(context.Background(), "k"); ok {
			passed++
		}
		c.Advance(time.Millisecond)
	}
	if passed != 3+69 {
		t.Errorf("%d passed in 9.999 s at 7/s burst 3, want 72", passed)
	}
}

func TestLocalConcurrent(t *testing.T) {
	c := newClock() // frozen: exactly Burst may pass
	l := c.local(t, Limit{Rate: 1, Burst: 100}, 0)
	var passed atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				if ok, _, _ := l.Allow(context.Background(), "shared"); ok {
					passed.Add(1)
				}
				_, _, _ = l.Allow(context.Background(), fmt.Sprint(g, "-", i))
			}
		})
	}
	wg.Wait()
	if passed.Load() != 100 {
		t.Errorf("%d passed concurrently, want the burst, 100", passed.Load())
	}
}

func TestLocalBoundedMemory(t *testing.T) {
	c := newClock()
	const maxKeys = 64 * 16
	l := c.local(t, Limit{Rate: 1, Burst: 1}, maxKeys)
	for i := range 50_000 {
		mustAllow(t, l, fmt.Sprint("key-", i)) // every key new: a full bucket
		if i%1000 == 0 {
			c.Advance(300 * time.Millisecond)
		}
	}
	if n := l.Len(); n > maxKeys {
		t.Errorf("%d keys tracked, MaxKeys %d", n, maxKeys)
	}
}

// TestLocalEvictsIdleFirst: a full shard drops the keys whose bucket is
// full again, and keeps the others while that makes room enough.
func TestLocalEvictsIdleFirst(t *testing.T) {
	s := shard{tat: make(map[uint64]int64)}
	now := t0.UnixNano()
	for i := range 16 {
		tat := now - 1 // idle
		if i%4 == 0 {
			tat = now + int64(time.Second) // active
		}
		s.tat[uint64(i)] = tat
	}
	s.evict(now, 16)
	if len(s.tat) != 4 {
		t.Fatalf("%d keys left, want the 4 active", len(s.tat))
	}
	for h := range s.tat {
		if h%4 != 0 {
			t.Errorf("idle key %d kept", h)
		}
	}
	// All active: an eighth of the shard goes, the least charged first.
	for i := range 16 {
		s.tat[uint64(i)] = now + int64(i+1)*int64(time.Second)
	}
	s.evict(now, 16)
	if len(s.tat) != 14 {
		t.Errorf("%d keys left, want 14", len(s.tat))
	}
	for h := range 2 {
		if _, ok := s.tat[uint64(h)]; ok {
			t.Errorf("key %d, among the two least charged, was kept", h)
		}
	}
}

// TestLocalThrottledKeySurvivesFlood: an attacker who fills the victim's
// shard with one-off keys, again and again, never resets the limit of a
// key being throttled (a per-account login limit under attack).
func TestLocalThrottledKeySurvivesFlood(t *testing.T) {
	c := newClock()
	const maxKeys = 64 * 8 // 8 keys a shard
	l := c.local(t, Limit{Rate: 10.0 / 60, Burst: 5}, maxKeys)
	victim := "login:user:victim"
	for range 5 {
		mustAllow(t, l, victim)
	}
	mustDeny(t, l, victim)
	shard := l.shardOf(victim)
	sent := 0
	for i := 0; sent < 2000; i++ {
		k := fmt.Sprint("one-off-", i)
		if l.shardOf(k) != shard {
			continue
		}
		sent++
		mustAllow(t, l, k)
		if sent%100 == 0 {
			c.Advance(10 * time.Millisecond) // the flood takes a while; not long enough to refill the victim
			mustDeny(t, l, victim)
		}
	}
	mustDeny(t, l, victim)
}

func TestLocalAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	c := newClock()
	l := c.local(t, Limit{Rate: 1000, Burst: 10}, 0)
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprint("client-", i)
		mustAllow(t, l, keys[i])
	}
	ctx := context.Background()
	i := 0
	allocs := testing.AllocsPerRun(10_000, func() {
		_, _, _ = l.Allow(ctx, keys[i%len(keys)])
		i++
		c.Advance(time.Microsecond)
	})
	if allocs != 0 {
		t.Errorf("Local.Allow allocates %v times per call in the steady state", allocs)
	}
}

func TestLimitValidate(t *testing.T) {
	for _, l := range []Limit{
		{}, {Rate: 1}, {Burst: 1}, {Rate: -1, Burst: 1}, {Rate: math.NaN(), Burst: 1},
		{Rate: math.Inf(1), Burst: 1}, {Rate: 2e6, Burst: 1}, {Rate: 1e-9, Burst: 1},
	} {
		if err := l.Validate(); !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("%+v: Validate = %v", l, err)
		}
		if _, err := NewLocal(LocalConfig{Limit: l}); err == nil {
			t.Errorf("%+v: NewLocal accepted it", l)
		}
	}
	for _, l := range []Limit{{Rate: 1, Burst: 1}, {Rate: 0.001, Burst: 10}, {Rate: 1e6, Burst: 1e6}} {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
}

func BenchmarkLocalAllow(b *testing.B) {
	l, err := NewLocal(LocalConfig{Limit: Limit{Rate: 1e6, Burst: 1000}})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprint("client-", i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	var seq atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		i := seq.Add(1) * 7919
		for pb.Next() {
			_, _, _ = l.Allow(ctx, keys[i%uint64(len(keys))])
			i++
		}
	})
}
