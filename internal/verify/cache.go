package verify

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/keygate/keygate/jose"
)

// CacheConfig bounds the verified-token cache.
//
// The cache holds only tokens that passed every check, and a hit requires
// the whole presented token to equal the cached one byte for byte, so a
// hit cannot be forged. The cache is split into shards (up to 64, each
// with its own lock, map and share of both bounds: MaxEntries/shards
// entries and MaxBytes/shards bytes), so neither bound is ever exceeded and
// no lock is global. A token is hashed once per request, with a seed chosen
// at random when the pipeline is built; that hash picks the shard and is
// the key within it.
//
// # Eviction
//
// Each shard runs CLOCK (second chance): a hit sets the entry's reference
// bit; when an insert would exceed the shard's share, the clock hand
// sweeps the shard, clearing the bit of referenced entries and taking the
// first entry that is expired or unreferenced; the new entry takes the
// victim's slot. Hot tokens therefore stay, a flood of one-off tokens
// mostly displaces itself, and a hit costs one atomic load (and a store
// only when the bit was clear) rather than the list surgery of an LRU.
//
// # Lifetime and revocation
//
// An entry lives until min(token exp, verification time + MaxTTL). On every
// hit the pipeline checks, without locks or allocation, that the entry has
// not expired, that the issuer's current key set still maps the token's
// (kid, alg) to a key with the thumbprint that verified it (so a key
// rotated out stops its tokens on the next request), and the revocation
// checker. Refusals are never cached.
type CacheConfig struct {
	// Disabled turns the cache off: every request verifies in full.
	// Concurrent requests with the same token still verify once.
	Disabled bool
	// MaxEntries bounds the number of cached tokens (default 100,000).
	MaxEntries int
	// MaxBytes bounds the memory the entries account for: the token, its
	// decoded form and the result (default 64 MiB).
	MaxBytes int64
	// MaxTTL bounds how long a token stays cached, however distant its exp
	// (default 5 minutes).
	MaxTTL time.Duration
}

// Cache defaults.
const (
	DefaultCacheEntries = 100_000
	DefaultCacheBytes   = 64 << 20
	DefaultCacheTTL     = 5 * time.Minute
)

// Small caches get fewer shards, so that each shard can hold a useful
// number of entries within its share of both bounds.
const (
	maxShards       = 64
	minShardEntries = 16
	minShardBytes   = 64 << 10
)

// CacheStats is a snapshot of the cache's counters.
type CacheStats struct {
	Entries   int
	Bytes     int64
	Hits      uint64 // requests answered from the cache
	Misses    uint64 // requests that verified in full (or waited for one that did)
	Evictions uint64 // entries dropped to make room, or because they expired or their key left
}

type cache struct {
	seed       maphash.Seed
	shards     []shard
	mask       uint64
	disabled   bool
	maxEntries int   // per shard
	maxBytes   int64 // per shard
	maxTTL     time.Duration
}

// shard is one lock's worth of cache, and of in-flight verifications.
// Both maps are keyed by the token's hash; the entry holds the token,
// which a lookup compares in full.
type shard struct {
	mu      sync.RWMutex
	entries map[uint64]*entry
	ring    []*entry // the clock; entry.idx is its position here
	hand    int
	bytes   int64
	flights map[uint64]*entry // verifications under way

	hits, misses, evictions atomic.Uint64
	_                       [64]byte // keep neighbouring shards' locks off this cache line
}

// entry is a token being verified (a flight, while done is open) and then,
// if it passed, a cached result. Every field but ref and idx is immutable
// once done is closed; idx is read and written only under the shard's
// write lock. Result lives inside the entry so that a verification
// allocates one object for both.
type entry struct {
	res     Result
	token   string
	hash    uint64
	pol     *policy
	key     *jose.Key                   // verified the token; compared by pointer first, then thumbprint
	set     atomic.Pointer[jose.KeySet] // the last key set found to hold key
	kid     string
	alg     jose.Alg
	iat     time.Time // for the revocation check; zero when the token has no iat
	expires int64     // Unix nanoseconds
	size    int64
	idx     int
	ref     atomic.Bool

	// While in flight: done is made by the first waiter and closed by the
	// verifying request, both under the shard's lock, so a verification
	// nobody waits for allocates no channel. Waiters read err (and res)
	// after done is closed.
	done     chan struct{}
	finished bool // under the shard's lock
	err      error
	waiters  atomic.Int32 // for tests

	// hdrBuf and valBuf hold the header values of policies that map a
	// few headers, saving two allocations.
	hdrBuf [4]HeaderValue
	valBuf [4]string
}

func newCache(cfg CacheConfig) (*cache, error) {
	if cfg.MaxEntries < 0 || cfg.MaxBytes < 0 || cfg.MaxTTL < 0 {
		return nil, &PolicyError{Field: "Cache", Msg: "bounds must not be negative"}
	}
	if cfg.MaxEntries == 0 {
		cfg.MaxEntries = DefaultCacheEntries
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultCacheBytes
	}
	if cfg.MaxTTL == 0 {
		cfg.MaxTTL = DefaultCacheTTL
	}
	n := maxShards
	for n > 1 && (cfg.MaxEntries/n < minShardEntries || cfg.MaxBytes/int64(n) < minShardBytes) {
		n /= 2
	}
	c := &cache{
		seed:       maphash.MakeSeed(),
		shards:     make([]shard, n),
		mask:       uint64(n - 1),
		disabled:   cfg.Disabled,
		maxEntries: cfg.MaxEntries / n,
		maxBytes:   cfg.MaxBytes / int64(n),
		maxTTL:     cfg.MaxTTL,
	}
	for i := range c.shards {
		c.shards[i].entries = make(map[uint64]*entry)
		c.shards[i].flights = make(map[uint64]*entry)
	}
	return c, nil
}

// locate hashes token and returns the hash and its shard. The shard index
// comes from the top bits, leaving the low bits to the shard's map.
func (c *cache) locate(token string) (*shard, uint64) {
	h := maphash.String(c.seed, token)
	return &c.shards[(h>>32)&c.mask], h
}

func (s *shard) get(h uint64, token string) *entry {
	s.mu.RLock()
	e := s.entries[h]
	s.mu.RUnlock()
	if e != nil && e.token != token {
		return nil // a hash collision: treat as a miss
	}
	return e
}

// drop removes e if it is still cached.
func (s *shard) drop(e *entry) {
	s.mu.Lock()
	if s.entries[e.hash] == e {
		s.remove(e)
		s.evictions.Add(1)
	}
	s.mu.Unlock()
}

// remove takes e out of the map and the clock. Caller holds s.mu.
func (s *shard) remove(e *entry) {
	delete(s.entries, e.hash)
	s.bytes -= e.size
	s.removeSlot(e.idx)
}

// removeSlot empties clock slot i by moving the last entry into it.
func (s *shard) removeSlot(i int) {
	last := len(s.ring) - 1
	moved := s.ring[last]
	s.ring[i] = moved
	moved.idx = i
	s.ring[last] = nil
	s.ring = s.ring[:last]
	if s.hand >= len(s.ring) {
		s.hand = 0
	}
}

// insert adds e, evicting until it fits. The last victim's clock slot
// takes the new entry and the hand moves past it, as in CLOCK proper, so
// the hand keeps sweeping the whole shard. Caller holds s.mu.
func (c *cache) insert(s *shard, e *entry, now int64) {
	if e.size > c.maxBytes || c.maxEntries == 0 || e.expires <= now {
		return
	}
	if old := s.entries[e.hash]; old != nil {
		s.remove(old)
	}
	s.entries[e.hash] = e
	s.bytes += e.size
	for len(s.ring) >= c.maxEntries || s.bytes > c.maxBytes {
		i := s.victim(now)
		v := s.ring[i]
		delete(s.entries, v.hash)
		s.bytes -= v.size
		s.evictions.Add(1)
		if len(s.ring) <= c.maxEntries && s.bytes <= c.maxBytes {
			s.ring[i], e.idx = e, i
			s.hand = (i + 1) % len(s.ring)
			return
		}
		s.removeSlot(i)
	}
	e.idx = len(s.ring)
	s.ring = append(s.ring, e)
}

// victim advances the clock hand to the first entry that is expired or was
// not hit since the hand last passed, clearing the reference bits it
// passes, and returns its index. Caller holds s.mu; the shard is not empty.
func (s *shard) victim(now int64) int {
	for {
		e := s.ring[s.hand]
		if e.expires <= now || !e.ref.Load() {
			return s.hand
		}
		e.ref.Store(false)
		s.hand++
		if s.hand == len(s.ring) {
			s.hand = 0
		}
	}
}

// entrySize estimates what an entry keeps alive: the token, its decoded
// copy and parsed form, the entry with its result and header values, and
// its map and clock slots.
func entrySize(e *entry) int64 {
	n := 2*len(e.token) + // the token, and its decoded bytes (shorter)
		int(unsafe.Sizeof(entry{})+unsafe.Sizeof(jose.Token{})) +
		64 // map slot, clock slot, allocation rounding
	for _, h := range e.res.Headers {
		n += int(unsafe.Sizeof(h)) + len(h.Value)
	}
	return int64(n)
}

func (c *cache) stats() CacheStats {
	var st CacheStats
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		st.Entries += len(s.ring)
		st.Bytes += s.bytes
		s.mu.RUnlock()
		st.Hits += s.hits.Load()
		st.Misses += s.misses.Load()
		st.Evictions += s.evictions.Load()
	}
	return st
}

// evict drops every entry whose result match accepts.
func (c *cache) evict(match func(*Result) bool) int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for j := 0; j < len(s.ring); {
			if e := s.ring[j]; match(&e.res) {
				s.remove(e) // moves the last entry to j
				n++
			} else {
				j++
			}
		}
		s.mu.Unlock()
	}
	return n
}
