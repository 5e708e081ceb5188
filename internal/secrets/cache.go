package secrets

import (
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The read cache. A read of a version found in it costs no store query:
// the engine keeps, per tenant and path, what two queries would return —
// the path's metadata row as it was read (its revision, the sealed blob,
// and the version numbers and times the store shows anyway) and the sealed
// values of the versions read. Nothing is kept in the clear: a value is
// opened under the tenant's data key at each read, as it is on a miss, and
// a path with custom metadata has its sealed metadata opened too.
//
// Every change this engine makes to a path drops the path's entry before
// the change is acknowledged, and is announced on the fleet's notice
// channel (CacheChannel), on which every node drops its own entry. An
// entry is put only if nothing of its shard was dropped since the read it
// comes from began (the shard's generation, as in the transit key cache),
// so a read that raced a change does not cache what it read before it. A
// node that missed a notice (Redis down) serves nothing older than MaxAge.

// CacheChannel is the node notice channel on which secret changes are
// announced: the payload is the tenant, a NUL and the path.
const CacheChannel = "secrets"

// Cache defaults.
const (
	// DefaultCacheBytes bounds the read cache when Options.CacheBytes is 0.
	DefaultCacheBytes = 32 << 20
	// DefaultCacheMaxAge is how old an entry may be when it is served when
	// Options.CacheMaxAge is 0 (as the transit keys' refresh_after).
	DefaultCacheMaxAge = 30 * time.Second
)

// cacheShards splits the cache so that no lock is global; each holds up to
// its share of the bytes.
const cacheShards = 16

// entryOverhead is what an entry is counted for beyond its bytes.
const entryOverhead = 160

// Notices is what the engine needs of its node for the cache (*node.Node
// is one): the fleet's notices, on which it announces its changes and
// hears the other nodes', and the node's seal and tenant deletions, at
// which it drops what it holds.
type Notices interface {
	Subscribe(ctx context.Context, channel string, handle func(ctx context.Context, payload string)) error
	Publish(ctx context.Context, channel, payload string) error
	OnSeal(f func())
	OnTenantDeleted(f func(tenant string))
}

// CacheStats are the read cache's counters.
type CacheStats struct {
	Hits, Misses     uint64 // reads answered from it, and reads of the store for a read
	Drops            uint64 // entries dropped by a change (here or announced)
	Entries, Bytes   int64  // what it holds now
	CapacityBytes    int64
	NoticesMalformed uint64
}

type pathID struct{ tenant, path string }

// pathEntry is a path as read from the store at one moment; immutable,
// replaced whole.
type pathEntry struct {
	rev      int64
	loaded   time.Time
	meta     []byte        // the sealed metadata (opened only for custom metadata)
	custom   bool          // the metadata holds custom metadata
	current  int           // the current version
	gen      int64         // the path's generation
	versions []versionMeta // the kept versions' metadata, ascending
	values   map[int]sealedValue
	size     int64
}

// sealedValue is a version's value as the store holds it, and the
// additional data it opens with as the tenant's data key binds it
// (tenantkey.Key.Bind).
type sealedValue struct {
	sealed, bound []byte
}

// readCache is the engine's read cache.
type readCache struct {
	seed   maphash.Seed
	maxAge time.Duration
	per    int64 // bytes per shard
	shards [cacheShards]cacheShard

	hits, misses, drops, malformed atomic.Uint64
}

type cacheShard struct {
	mu    sync.RWMutex
	m     map[pathID]*pathEntry
	bytes int64
	gen   uint64 // one more at each drop from the shard
}

func newReadCache(bytes int64, maxAge time.Duration) *readCache {
	c := &readCache{seed: maphash.MakeSeed(), maxAge: maxAge, per: max(1, bytes/cacheShards)}
	for i := range c.shards {
		c.shards[i].m = map[pathID]*pathEntry{}
	}
	return c
}

func (c *readCache) shard(id pathID) *cacheShard {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(id.tenant)
	h.WriteByte(0)
	h.WriteString(id.path)
	return &c.shards[h.Sum64()%cacheShards]
}

// get returns the path's entry if it is younger than maxAge at now.
func (c *readCache) get(id pathID, now time.Time) *pathEntry {
	sh := c.shard(id)
	sh.mu.RLock()
	e := sh.m[id]
	sh.mu.RUnlock()
	if e == nil || now.Sub(e.loaded) > c.maxAge {
		return nil
	}
	return e
}

// mark is the generation of the path's shard, taken before a read.
func (c *readCache) mark(id pathID) uint64 {
	sh := c.shard(id)
	sh.mu.RLock()
	g := sh.gen
	sh.mu.RUnlock()
	return g
}

// put caches e unless the shard was dropped from since mark, e does not fit
// a shard, or the shard holds a later read of the path (a higher revision)
// that has not expired.
func (c *readCache) put(id pathID, e *pathEntry, mark uint64) {
	if e.size > c.per {
		return
	}
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.gen != mark {
		return
	}
	old := sh.m[id]
	if old != nil {
		if old.rev > e.rev && e.loaded.Sub(old.loaded) <= c.maxAge {
			return // a later read is cached (an expired one is replaced: the path may have been erased and made again)
		}
		if old.rev == e.rev { // the same state: keep the other versions read of it
			for v, sv := range old.values {
				if _, ok := e.values[v]; !ok {
					e.values[v] = sv
					e.size += int64(len(sv.sealed) + len(sv.bound))
				}
			}
		}
		sh.bytes -= old.size
		delete(sh.m, id)
	}
	for victim, ve := range sh.m { // at random (map order) until it fits
		if sh.bytes+e.size <= c.per {
			break
		}
		sh.bytes -= ve.size
		delete(sh.m, victim)
	}
	sh.m[id] = e
	sh.bytes += e.size
}

// drop forgets the path's entry; a read of it in progress does not cache
// what it read.
func (c *readCache) drop(id pathID) {
	sh := c.shard(id)
	sh.mu.Lock()
	sh.gen++
	if e := sh.m[id]; e != nil {
		sh.bytes -= e.size
		delete(sh.m, id)
	}
	sh.mu.Unlock()
	c.drops.Add(1)
}

// dropWhere forgets every entry keep says to drop (every one with nil).
func (c *readCache) dropWhere(match func(pathID) bool) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		sh.gen++
		for id, e := range sh.m {
			if match == nil || match(id) {
				sh.bytes -= e.size
				delete(sh.m, id)
			}
		}
		sh.mu.Unlock()
	}
}

func (c *readCache) stats() CacheStats {
	s := CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Drops: c.drops.Load(),
		CapacityBytes: c.per * cacheShards, NoticesMalformed: c.malformed.Load()}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		s.Entries += int64(len(sh.m))
		s.Bytes += sh.bytes
		sh.mu.RUnlock()
	}
	return s
}

// newEntry is the entry of a path read from the store: s as load read it
// and the sealed value of version v.
func newEntry(s *state, path string, now time.Time, v int, value sealedValue) *pathEntry {
	e := &pathEntry{rev: s.rev, loaded: now, meta: s.sealed, custom: len(s.meta.Custom) > 0,
		current: s.meta.Current, gen: s.meta.Gen, versions: s.meta.Versions, values: map[int]sealedValue{v: value}}
	e.size = entryOverhead + int64(len(path)+len(s.sealed)+len(value.sealed)+len(value.bound)) + int64(len(e.versions))*32
	return e
}

// version returns the kept version n (0: the current), or nil.
func (e *pathEntry) version(n int) *versionMeta {
	if n == 0 {
		n = e.current
	}
	for i := range e.versions {
		if e.versions[i].Version == n {
			return &e.versions[i]
		}
	}
	return nil
}

// CacheStats reports the read cache's counters (zero without one).
func (e *Engine) CacheStats() CacheStats {
	if e.cache == nil {
		return CacheStats{}
	}
	return e.cache.stats()
}

// cachedRead answers a read of a live version from the cache: its data
// opened, its metadata and the path's custom metadata. ok is false when the
// cache cannot answer (no entry, an old one, the version not live or not
// held, a blob that does not open under the held key): the caller reads
// the store.
func (e *Engine) cachedRead(ctx context.Context, tenant, path string, version int) (data []byte, vm versionMeta, custom map[string]string, ok bool) {
	c := e.cache
	if c == nil {
		return nil, versionMeta{}, nil, false
	}
	now := e.now()
	ent := c.get(pathID{tenant, path}, now)
	if ent == nil {
		return nil, versionMeta{}, nil, false
	}
	v := ent.version(version)
	if v == nil || v.gone(now.UnixMicro()) {
		return nil, versionMeta{}, nil, false
	}
	sv, held := ent.values[v.Version]
	if !held {
		return nil, versionMeta{}, nil, false
	}
	dk, err := e.key(ctx, tenant, false)
	if err != nil {
		return nil, versionMeta{}, nil, false
	}
	pt, err := dk.OpenBound(sv.sealed, sv.bound)
	if err == nil {
		pt, err = unwrapValue(ent.gen, pt)
	}
	if err != nil {
		return nil, versionMeta{}, nil, false
	}
	if ent.custom {
		raw, err := dk.Open(ent.meta, metaAD(tenant, path))
		if err != nil {
			return nil, versionMeta{}, nil, false
		}
		m, err := unmarshalMeta(raw)
		if err != nil {
			return nil, versionMeta{}, nil, false
		}
		custom = m.Custom
	}
	c.hits.Add(1)
	return pt, *v, custom, true
}

// changed drops the path's entry here and announces the change to the
// fleet. It runs after every attempt at a change, whether or not it was
// stored: a write whose outcome is unknown must not leave the old state
// served.
func (e *Engine) changed(ctx context.Context, tenant, path string) {
	if e.cache != nil {
		e.cache.drop(pathID{tenant, path})
	}
	if e.notices == nil { // a node without a cache announces too: the others have theirs
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := e.notices.Publish(ctx, CacheChannel, tenant+"\x00"+path); err != nil {
		// The path is no secret (the store shows it); its data is not logged.
		e.log.Warn("announcing a secret change failed; other nodes serve what they cached of the path for at most the cache's max age",
			"tenant", tenant, "path", path, "err", err)
	}
}

// notice drops the path another node (or this one) changed.
func (e *Engine) notice(_ context.Context, payload string) {
	id, ok := parseNotice(payload)
	if !ok {
		e.cache.malformed.Add(1)
		e.log.Warn("malformed secret change notice ignored")
		return
	}
	e.cache.drop(id)
}

// parseNotice reads a change notice's payload (CacheChannel): the tenant,
// a NUL and the path, neither empty. The path may hold a NUL; the tenant
// cannot.
func parseNotice(payload string) (pathID, bool) {
	tenant, path, ok := strings.Cut(payload, "\x00")
	if !ok || tenant == "" || path == "" {
		return pathID{}, false
	}
	return pathID{tenant, path}, true
}

// listen subscribes the cache to the fleet's notices and the node's
// events.
func (e *Engine) listen(ctx context.Context, n Notices) {
	if err := n.Subscribe(ctx, CacheChannel, e.notice); err != nil {
		// Redis is down: until the subscription is made, no entry older
		// than the cache's max age is served.
		e.log.Warn("secret change notices: subscribing failed", "err", err)
	}
	if err := n.Subscribe(ctx, ConfigChannel, e.configNotice); err != nil {
		e.log.Warn("mount configuration notices: subscribing failed", "err", err)
	}
	c, cc := e.cache, e.configs
	n.OnSeal(func() {
		c.dropWhere(nil)
		cc.drop("")
	})
	n.OnTenantDeleted(func(tenant string) {
		c.dropWhere(func(id pathID) bool { return id.tenant == tenant })
		cc.drop(tenant)
	})
}
