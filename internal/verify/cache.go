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
//
// # Memory
//
// An entry is one allocation holding a copy of the token, its parsed form
// and the result, with no pointer out of it: the garbage collector marks
// each entry but scans none, so a full cache adds little to a collection.
// MaxBytes counts that allocation and the entry's slots in the shard.
type CacheConfig struct {
	// Disabled turns the cache off: every request verifies in full.
	// Concurrent requests with the same token still verify once.
	Disabled bool
	// MaxEntries bounds the number of cached tokens (default 100,000).
	MaxEntries int
	// MaxBytes bounds the memory the entries take: a copy of the token,
	// its decoded form and the result (default 64 MiB).
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
// Both maps are keyed by the token's hash; the cached entry holds the
// token, which a lookup compares in full. index holds no pointers and the
// clock one per entry, to an allocation the collector does not scan, so
// a full cache costs the collector a mark per entry and nothing more.
type shard struct {
	mu      sync.RWMutex
	index   map[uint64]int // token hash to its clock slot
	ring    []*cached      // the clock
	hand    int
	bytes   int64
	flights map[uint64]*flight // verifications under way

	hits, misses, evictions atomic.Uint64
	_                       [64]byte // keep neighbouring shards' locks off this cache line
}

// flight is a token being verified. The first request to present it
// verifies; the others wait for done and then read out or err. Its result
// and header buffers serve when the result is not cached; a cached result
// is copied out of them (see pack).
type flight struct {
	token string
	hash  uint64

	// done is made by the first waiter and closed by the verifying request,
	// both under the shard's lock, so a verification nobody waits for
	// allocates no channel.
	done     chan struct{}
	finished bool // under the shard's lock
	reusable bool // set by land: nothing refers to the flight any more
	out      *Result
	err      error
	waiters  atomic.Int32 // for tests

	res     Result
	pol     *policy
	alg     jose.Alg
	iat     time.Time
	expires int64  // Unix nanoseconds
	keySet  uint64 // serial of the key set the key was found in

	// hdrBuf and valBuf hold the header values of policies that map a
	// few headers, saving two allocations.
	hdrBuf [4]HeaderValue
	valBuf [4]string
}

// cached is a verified token as the cache keeps it: one allocation, made
// by jose's Token.Clone, holds the token, its parsed form, this struct, the
// result's header values and every string the result refers to. Nothing in
// it refers out of it (the times' locations are globals), so the collector
// marks it and never scans it; whoever holds the Result, or any string of
// it, keeps it alive. Its strings are never written; only ref and keySet
// change once it is published.
type cached struct {
	res     Result
	token   string // the compact token, res.Token.Raw()
	kid     string
	iat     time.Time // for the revocation check; zero when the token has no iat
	hash    uint64
	expires int64 // Unix nanoseconds
	size    int64
	pol     int // the issuer's policy, in Pipeline.pols
	alg     jose.Alg
	ref     atomic.Bool   // CLOCK reference bit
	keySet  atomic.Uint64 // serial of the issuer's key set in which the key was last found
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
		c.shards[i].index = make(map[uint64]int)
		c.shards[i].flights = make(map[uint64]*flight)
	}
	return c, nil
}

// locate hashes token and returns the hash and its shard. The shard index
// comes from the top bits, leaving the low bits to the shard's map.
func (c *cache) locate(token string) (*shard, uint64) {
	h := maphash.String(c.seed, token)
	return &c.shards[(h>>32)&c.mask], h
}

func (s *shard) get(h uint64, token string) *cached {
	var c *cached
	s.mu.RLock()
	if i, ok := s.index[h]; ok {
		c = s.ring[i]
	}
	s.mu.RUnlock()
	if c != nil && c.token != token {
		return nil // a hash collision: treat as a miss
	}
	return c
}

// drop removes c if it is still cached.
func (s *shard) drop(c *cached) {
	s.mu.Lock()
	if i, ok := s.index[c.hash]; ok && s.ring[i] == c {
		s.remove(i)
		s.evictions.Add(1)
	}
	s.mu.Unlock()
}

// remove takes the entry in clock slot i out of the index and the clock.
// Caller holds s.mu.
func (s *shard) remove(i int) {
	c := s.ring[i]
	delete(s.index, c.hash)
	s.bytes -= c.size
	s.removeSlot(i)
}

// removeSlot empties clock slot i, whose entry has left the index, by
// moving the last entry into it.
func (s *shard) removeSlot(i int) {
	last := len(s.ring) - 1
	if i != last {
		moved := s.ring[last]
		s.ring[i] = moved
		s.index[moved.hash] = i
	}
	s.ring[last] = nil
	s.ring = s.ring[:last]
	if s.hand >= len(s.ring) {
		s.hand = 0
	}
}

// insert adds c, evicting until it fits. The last victim's clock slot
// takes the new entry and the hand moves past it, as in CLOCK proper, so
// the hand keeps sweeping the whole shard. Caller holds s.mu.
func (ca *cache) insert(s *shard, c *cached, now int64) {
	if c.size > ca.maxBytes || ca.maxEntries == 0 || c.expires <= now {
		return
	}
	if i, ok := s.index[c.hash]; ok {
		s.remove(i)
	}
	s.bytes += c.size
	for len(s.ring) >= ca.maxEntries || s.bytes > ca.maxBytes {
		i := s.victim(now)
		v := s.ring[i]
		delete(s.index, v.hash)
		s.bytes -= v.size
		s.evictions.Add(1)
		if len(s.ring) <= ca.maxEntries && s.bytes <= ca.maxBytes {
			s.ring[i] = c
			s.index[c.hash] = i
			s.hand = (i + 1) % len(s.ring)
			return
		}
		s.removeSlot(i)
	}
	s.index[c.hash] = len(s.ring)
	s.ring = append(s.ring, c)
}

// victim advances the clock hand to the first entry that is expired or was
// not hit since the hand last passed, clearing the reference bits it
// passes, and returns its index. Caller holds s.mu; the shard is not empty.
func (s *shard) victim(now int64) int {
	for {
		c := s.ring[s.hand]
		if c.expires <= now || !c.ref.Load() {
			return s.hand
		}
		c.ref.Store(false)
		s.hand++
		if s.hand == len(s.ring) {
			s.hand = 0
		}
	}
}

// slotBytes is what an entry costs the shard besides its allocation: its
// index slot (16 bytes in a table at most 7/8 full) and its clock slot.
const slotBytes = 16*8/7 + 8

// pack copies f's verified token and result into one allocation (see
// cached) and returns it.
func (p *Pipeline) pack(f *flight, t *jose.Token) *cached {
	r := &f.res
	n := int(unsafe.Sizeof(cached{})) + len(r.Headers)*int(unsafe.Sizeof(HeaderValue{})+unsafe.Sizeof(""))
	for _, h := range r.Headers {
		n += len(h.Name) + len(h.Value)
	}
	n += len(r.KeyID) + len(r.KeyThumbprint)
	tok, spare := t.Clone(n)
	c := (*cached)(unsafe.Pointer(&spare[0]))
	rest := spare[unsafe.Sizeof(cached{}):n]
	take := func(size uintptr) unsafe.Pointer {
		if size == 0 {
			return nil
		}
		at := unsafe.Pointer(&rest[0])
		rest = rest[size:]
		return at
	}
	str := func(s string) string {
		if s == "" {
			return ""
		}
		b := unsafe.Slice((*byte)(take(uintptr(len(s)))), len(s))
		copy(b, s)
		return unsafe.String(&b[0], len(b))
	}
	var hdrs []HeaderValue
	if r.Headers != nil {
		hdrs = unsafe.Slice((*HeaderValue)(take(uintptr(len(r.Headers))*unsafe.Sizeof(HeaderValue{}))), len(r.Headers))
		vals := unsafe.Slice((*string)(take(uintptr(len(r.Headers))*unsafe.Sizeof(""))), len(r.Headers))
		for i, h := range r.Headers {
			vals[i] = str(h.Value)
			hdrs[i] = HeaderValue{Name: str(h.Name), Value: vals[i], vals: vals[i : i+1 : i+1]}
		}
	}
	cl := &tok.Claims
	c.res = Result{
		Issuer: cl.Issuer, Subject: cl.Subject, ID: cl.ID, Scope: cl.Scope, Expiry: r.Expiry,
		Headers: hdrs, Token: tok, KeyID: str(r.KeyID), KeyThumbprint: str(r.KeyThumbprint),
	}
	c.token, c.kid, c.iat = tok.Raw(), tok.Header.KeyID, f.iat
	c.hash, c.expires, c.pol, c.alg = f.hash, f.expires, f.pol.idx, f.alg
	c.keySet.Store(f.keySet)
	c.size = int64(uintptr(unsafe.Pointer(&spare[0]))-uintptr(unsafe.Pointer(tok))) + int64(cap(spare)) + slotBytes
	return c
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
			if match(&s.ring[j].res) {
				s.remove(j) // moves the last entry to j
				n++
			} else {
				j++
			}
		}
		s.mu.Unlock()
	}
	return n
}
