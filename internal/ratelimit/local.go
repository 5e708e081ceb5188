package ratelimit

import (
	"context"
	"hash/maphash"
	"slices"
	"sync"
	"time"
)

// LocalConfig configures a Local limiter.
type LocalConfig struct {
	Limit Limit
	// MaxKeys bounds the keys tracked at once (default 100,000; each costs
	// about 16 bytes plus map overhead, whatever the key's length). Past it
	// idle keys are forgotten first, which changes nothing: an idle key's
	// bucket is full. Only when too few are idle are active keys forgotten,
	// those nearest to a full bucket first: a key being throttled hard (an
	// account under a guessing attack) is the last to go, so filling a
	// shard with one-off keys cannot reset its limit.
	MaxKeys int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

const (
	defaultMaxKeys = 100_000
	numShards      = 64 // a power of two
)

// Local is a Limiter whose buckets live in this process. Keys are spread
// over lock-striped shards by a hash with a per-process random seed, and
// each bucket is one int64 (its theoretical arrival time) stored under the
// key's 64-bit hash, so memory per key does not depend on the key, and
// Allow on a key already tracked allocates nothing.
type Local struct {
	t, tau   int64 // emission interval and tolerance, ns
	perShard int
	now      func() time.Time
	seed     maphash.Seed
	shards   [numShards]shard
}

type shard struct {
	mu      sync.Mutex
	tat     map[uint64]int64 // key hash → theoretical arrival time, Unix ns
	scratch []int64          // evict's buffer, kept to not allocate each time
	_       [24]byte         // keep shards on separate cache lines
}

var _ Limiter = (*Local)(nil)

// NewLocal returns a Local limiter.
func NewLocal(cfg LocalConfig) (*Local, error) {
	if err := cfg.Limit.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = defaultMaxKeys
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	t, tau := cfg.Limit.interval()
	l := &Local{t: int64(t), tau: int64(tau), perShard: max(cfg.MaxKeys/numShards, 1), now: cfg.Now, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].tat = make(map[uint64]int64)
	}
	return l, nil
}

// Allow takes one request from key's bucket if it holds one. It never
// fails; ctx is unused.
func (l *Local) Allow(_ context.Context, key string) (bool, time.Duration, error) {
	h := maphash.String(l.seed, key)
	s := &l.shards[shardIndex(h)]
	now := l.now().UnixNano()
	s.mu.Lock()
	tat, ok := s.tat[h]
	if !ok && len(s.tat) >= l.perShard {
		s.evict(now, l.perShard)
	}
	tat = max(tat, now)
	next := tat + l.t
	if ahead := next - now; ahead > l.tau {
		s.mu.Unlock()
		return false, time.Duration(ahead - l.tau), nil
	}
	s.tat[h] = next
	s.mu.Unlock()
	return true, 0, nil
}

// shardIndex takes a hash's top bits: the map uses the low ones.
func shardIndex(h uint64) uint64 { return h >> (64 - 6) }

// evict makes room in a full shard: it drops every idle key (its bucket is
// full again, so forgetting it changes nothing), and if that frees less
// than an eighth of the shard, the active keys with the earliest
// theoretical arrival times too (the least charged, nearest to a full
// bucket), so that the next evictions are an eighth of a shard of inserts
// away. Keys charged hardest stay: forgetting one would hand it a full
// burst again.
func (s *shard) evict(now int64, limit int) {
	for h, tat := range s.tat {
		if tat <= now {
			delete(s.tat, h)
		}
	}
	target := limit - max(limit/8, 1)
	excess := len(s.tat) - target
	if excess <= 0 {
		return
	}
	s.scratch = s.scratch[:0]
	for _, tat := range s.tat {
		s.scratch = append(s.scratch, tat)
	}
	slices.Sort(s.scratch)
	cut := s.scratch[excess-1] // drop every key at or below the excess-th earliest
	for h, tat := range s.tat {
		if tat <= cut {
			delete(s.tat, h)
		}
	}
}

// Len returns the number of keys tracked.
func (l *Local) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.tat)
		s.mu.Unlock()
	}
	return n
}
