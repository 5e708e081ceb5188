package ratelimit

import (
	"context"
	"hash/maphash"
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
	// at random, each getting a full bucket again.
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
	mu  sync.Mutex
	tat map[uint64]int64 // key hash → theoretical arrival time, Unix ns
	_   [48]byte         // keep shards on separate cache lines
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
	s := &l.shards[h>>(64-6)] // top bits: the map uses the low ones
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

// evict makes room in a full shard: it drops every idle key (its bucket is
// full again, so forgetting it changes nothing), and if that frees less
// than an eighth of the shard, random active keys too, so that the next
// evictions are an eighth of a shard of inserts away.
func (s *shard) evict(now int64, limit int) {
	for h, tat := range s.tat {
		if tat <= now {
			delete(s.tat, h)
		}
	}
	target := limit - max(limit/8, 1)
	for h := range s.tat { // map order is random
		if len(s.tat) <= target {
			break
		}
		delete(s.tat, h)
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
