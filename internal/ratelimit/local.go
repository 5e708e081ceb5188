package ratelimit

import (
	"context"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"time"
)

// LocalConfig configures a Local limiter.
type LocalConfig struct {
	Limit Limit
	// MaxKeys bounds the keys tracked at once (default 100,000; each costs
	// about 24 bytes plus map overhead, whatever the key's length), in 64
	// shards of MaxKeys/64 by a hash with a per-process random seed. A full
	// shard forgets, to make room for a new key:
	//
	//  1. every bucket that has refilled completely (forgetting it changes
	//     nothing);
	//  2. then buckets within one request of a full bucket, least recently
	//     charged first;
	//  3. never a bucket more than one request short of full (throttled:
	//     an account under a guessing attack), while any other can go.
	//
	// So forgetting a bucket hands its key at most one request early, and
	// filling a shard with new keys, charged to their burst or not, cannot
	// reset a throttled key's limit. "Within one request", rather than "not
	// refusing now", because an attacker who stops one request short of
	// the limit would otherwise keep the key evictable and win back a
	// whole burst with each flood. When a shard holds only throttled
	// buckets its new keys are refused (with the wait until one of them
	// can go) rather than any forgotten: failing closed costs new keys of
	// that shard some waiting while an attacker keeps MaxKeys/64 keys of
	// it charged past one request each (more than one request per key
	// every 1/Rate), where failing open would hand the throttled key a
	// full burst again.
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
// each bucket is two int64s stored under the key's 64-bit hash, so memory
// per key does not depend on the key, and Allow on a key already tracked
// allocates nothing.
type Local struct {
	t, tau   int64 // emission interval and tolerance, ns
	perShard int
	now      func() time.Time
	seed     maphash.Seed
	shards   [numShards]shard
}

type shard struct {
	mu      sync.Mutex
	buckets map[uint64]bucket // by key hash
	scratch []int64           // evict's buffer, kept to not allocate each time
	_       [24]byte          // keep shards on separate cache lines
}

// bucket is one key's state.
type bucket struct {
	tat  int64 // theoretical arrival time, Unix ns: full when not after now
	last int64 // when a request was last allowed, Unix ns
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
		l.shards[i].buckets = make(map[uint64]bucket)
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
	b, ok := s.buckets[h]
	if !ok && len(s.buckets) >= l.perShard {
		if room, wait := s.evict(now, l.t, l.perShard); !room {
			s.mu.Unlock()
			return false, time.Duration(max(wait, 1)), nil
		}
	}
	tat := max(b.tat, now)
	next := tat + l.t
	if ahead := next - now; ahead > l.tau {
		s.mu.Unlock()
		return false, time.Duration(ahead - l.tau), nil
	}
	s.buckets[h] = bucket{tat: next, last: now}
	s.mu.Unlock()
	return true, 0, nil
}

// shardIndex takes a hash's top bits: the map uses the low ones.
func shardIndex(h uint64) uint64 { return h >> (64 - 6) }

// evict makes room in a full shard of limit buckets, in the order
// LocalConfig.MaxKeys gives: every refilled bucket, then, if that frees
// less than an eighth of the shard (so that the next evictions are an
// eighth of a shard of inserts away), the buckets at most one request (t)
// short of full, least recently charged first, up to that eighth. With no
// room left it forgets nothing and returns how long until a bucket is
// within a request of full.
func (s *shard) evict(now, t int64, limit int) (room bool, wait int64) {
	for h, b := range s.buckets {
		if b.tat <= now {
			delete(s.buckets, h)
		}
	}
	excess := len(s.buckets) - (limit - max(limit/8, 1))
	if excess <= 0 {
		return true, 0
	}
	s.scratch = s.scratch[:0]
	for _, b := range s.buckets {
		if b.tat-now <= t {
			s.scratch = append(s.scratch, b.last)
		}
	}
	if len(s.scratch) > 0 {
		slices.Sort(s.scratch)
		cut := s.scratch[min(excess, len(s.scratch))-1] // the excess-th least recently charged
		for h, b := range s.buckets {
			if b.tat-now <= t && b.last <= cut {
				delete(s.buckets, h)
			}
		}
	}
	if len(s.buckets) < limit {
		return true, 0
	}
	first := int64(math.MaxInt64)
	for _, b := range s.buckets {
		first = min(first, b.tat)
	}
	return false, first - t - now
}

// Len returns the number of keys tracked.
func (l *Local) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.buckets)
		s.mu.Unlock()
	}
	return n
}
