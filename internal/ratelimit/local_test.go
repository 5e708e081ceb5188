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
	s := shard{buckets: make(map[uint64]bucket)}
	now := t0.UnixNano()
	const interval = int64(16 * time.Second) // every bucket below is within a request of full
	for i := range 16 {
		tat := now - 1 // idle
		if i%4 == 0 {
			tat = now + int64(time.Second) // active
		}
		s.buckets[uint64(i)] = bucket{tat: tat, last: tat - interval}
	}
	s.evict(now, interval, 16)
	if len(s.buckets) != 4 {
		t.Fatalf("%d keys left, want the 4 active", len(s.buckets))
	}
	for h := range s.buckets {
		if h%4 != 0 {
			t.Errorf("idle key %d kept", h)
		}
	}
	// All active: an eighth of the shard goes, the least charged (here
	// also the least recently charged) first.
	for i := range 16 {
		tat := now + int64(i+1)*int64(time.Second)
		s.buckets[uint64(i)] = bucket{tat: tat, last: tat - interval}
	}
	s.evict(now, interval, 16)
	if len(s.buckets) != 14 {
		t.Errorf("%d keys left, want 14", len(s.buckets))
	}
	for h := range 2 {
		if _, ok := s.buckets[uint64(h)]; ok {
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

// TestLocalThrottledKeySurvivesChargedFillers: filler keys charged to
// their burst (throttled themselves, so not evicted before the victim by
// "least charged first") never make the victim's shard forget it: the
// victim stays refused until its own bucket has refilled, and while the
// shard holds only throttled buckets its new keys are refused rather than
// any of them forgotten, with the wait until one can go.
func TestLocalThrottledKeySurvivesChargedFillers(t *testing.T) {
	c := newClock()
	const maxKeys = 64 * 8 // 8 keys a shard
	lim := Limit{Rate: 10.0 / 60, Burst: 5}
	l := c.local(t, lim, maxKeys)
	victim := "login:user:victim"
	for range 5 {
		mustAllow(t, l, victim)
	}
	mustDeny(t, l, victim)
	shard := l.shardOf(victim)
	ctx := context.Background()
	filled, refused := 0, 0
	for i := 0; filled+refused < 200; i++ {
		k := fmt.Sprint("filler-", i)
		if l.shardOf(k) != shard {
			continue
		}
		ok, wait, _ := l.Allow(ctx, k)
		if !ok {
			refused++
			if wait <= 0 {
				t.Fatalf("a new key refused in a full shard with wait %v", wait)
			}
			continue
		}
		filled++
		for ok {
			ok, _, _ = l.Allow(ctx, k) // charged to its burst
		}
		c.Advance(5 * time.Millisecond)
		mustDeny(t, l, victim)
	}
	if filled != 7 || refused != 193 {
		t.Errorf("%d fillers tracked and %d refused, want 7 (the shard's room beside the victim) and 193", filled, refused)
	}
	// The security review's probe: a second later, still refused.
	c.Advance(time.Second)
	mustDeny(t, l, victim)
	// Its own refill, and no more: one request every 6 s.
	c.Advance(6 * time.Second)
	mustAllow(t, l, victim)
	mustDeny(t, l, victim)
}

// TestLocalEvictionOrder: a full shard forgets refilled buckets first, then
// those within one request of a full bucket, least recently charged first,
// and never one more than a request short while any other can go.
func TestLocalEvictionOrder(t *testing.T) {
	const sec = int64(time.Second)
	now := t0.UnixNano()
	s := shard{buckets: make(map[uint64]bucket)}
	// keys 0-3 refilled; 4-9 within a request (T = 1 s) of full, charged
	// at 9-4 s ago; 10-15 throttled, charged just now.
	for i := range 16 {
		switch {
		case i < 4:
			s.buckets[uint64(i)] = bucket{tat: now - 1, last: now - 20*sec}
		case i < 10:
			s.buckets[uint64(i)] = bucket{tat: now + sec/2, last: now - int64(13-i)*sec}
		default:
			s.buckets[uint64(i)] = bucket{tat: now + 4*sec, last: now}
		}
	}
	if room, _ := s.evict(now, sec, 16); !room || len(s.buckets) != 12 {
		t.Fatalf("room %v, %d left; want the 4 refilled gone, room", room, len(s.buckets))
	}
	for len(s.buckets) < 16 { // full again with throttled keys: evicting leaves 14
		s.buckets[uint64(100+len(s.buckets))] = bucket{tat: now + 4*sec, last: now}
	}
	if room, _ := s.evict(now, sec, 16); !room || len(s.buckets) != 14 {
		t.Fatalf("room %v, %d left; want 14", room, len(s.buckets))
	}
	for _, gone := range []uint64{4, 5} {
		if _, ok := s.buckets[gone]; ok {
			t.Errorf("key %d, among the two least recently charged, was kept", gone)
		}
	}
	// Only throttled buckets: none is forgotten, and the wait is until
	// the first is within a request of full.
	for h, b := range s.buckets {
		if b.tat-now <= sec {
			delete(s.buckets, h)
		}
	}
	for i := 0; len(s.buckets) < 16; i++ {
		s.buckets[uint64(200+i)] = bucket{tat: now + 3*sec, last: now}
	}
	n := len(s.buckets)
	if room, wait := s.evict(now, sec, 16); room || len(s.buckets) != n || wait != 2*sec {
		t.Errorf("only throttled: room %v, %d of %d left, wait %v; want no room, all kept, 2s", room, len(s.buckets), n, time.Duration(wait))
	}
}
