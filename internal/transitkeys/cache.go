package transitkeys

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keygate/keygate/internal/transit"
)

// keyID names a key: its tenant and its name.
type keyID struct{ tenant, name string }

// entry is a key as read from the store at one moment: an immutable
// snapshot, replaced whole when the key changes.
type entry struct {
	key      *transit.Key
	revision int64     // the store's revision it was read at (or written as)
	created  time.Time // the store row's creation: tells a key from one deleted and made again under its name
	loaded   time.Time // when it was read or written
	sealed   map[int][]byte
}

// newer reports whether e is a later state of the key than old: another
// incarnation of the name, or a higher revision of the same one.
func (e *entry) newer(old *entry) bool {
	return old == nil || !e.created.Equal(old.created) || e.revision >= old.revision
}

// cacheShards splits the cache so that no lock is global.
const cacheShards = 64

// cache holds the entries of the keys in use, at most max in all. Reads
// take a shard's read lock; a full shard drops an entry at random (Go's
// map order) to make room.
type cache struct {
	seed   maphash.Seed
	shards [cacheShards]shard
	per    int           // entries per shard
	epoch  atomic.Uint64 // one more at each clear and dropTenant: an entry read before a seal is not put after it
}

type shard struct {
	mu sync.RWMutex
	m  map[keyID]*entry
}

func newCache(entries int) *cache {
	c := &cache{seed: maphash.MakeSeed(), per: max(1, (entries+cacheShards-1)/cacheShards)}
	for i := range c.shards {
		c.shards[i].m = map[keyID]*entry{}
	}
	return c
}

func (c *cache) shard(id keyID) *shard {
	return &c.shards[maphash.Comparable(c.seed, id)%cacheShards]
}

func (c *cache) get(id keyID) *entry {
	sh := c.shard(id)
	sh.mu.RLock()
	e := sh.m[id]
	sh.mu.RUnlock()
	return e
}

// put caches e unless the cache was cleared since epoch was read, or it
// holds a later state of the key already.
func (c *cache) put(id keyID, e *entry, epoch uint64) {
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.epoch.Load() != epoch {
		return
	}
	old, ok := sh.m[id]
	if ok && !e.newer(old) {
		return
	}
	if !ok && len(sh.m) >= c.per {
		for victim := range sh.m {
			delete(sh.m, victim)
			break
		}
	}
	sh.m[id] = e
}

// drop forgets the key's entry, and returns it (nil: none).
func (c *cache) drop(id keyID) *entry {
	sh := c.shard(id)
	sh.mu.Lock()
	e := sh.m[id]
	delete(sh.m, id)
	sh.mu.Unlock()
	return e
}

// dropTenant forgets the tenant's entries, and returns them; entries read
// before it are not put after it.
func (c *cache) dropTenant(tenant string) []*entry {
	c.epoch.Add(1)
	var dropped []*entry
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for id, e := range sh.m {
			if id.tenant == tenant {
				dropped = append(dropped, e)
				delete(sh.m, id)
			}
		}
		sh.mu.Unlock()
	}
	return dropped
}

// clear forgets every entry; entries read before it are not put after it.
func (c *cache) clear() {
	c.epoch.Add(1)
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		clear(sh.m)
		sh.mu.Unlock()
	}
}

func (c *cache) len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		n += len(sh.m)
		sh.mu.RUnlock()
	}
	return n
}
