package keystore

import (
	"hash/maphash"
	"sync"
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
//
// An entry is put only if nothing of its shard was dropped since the read
// it comes from began (mark, put): a key deleted, or the node sealed,
// while it was being read is not cached from that read. The generation is
// the shard's, not the key's, so that nothing is kept of keys that are
// gone; a drop of another key of the shard costs a read in progress no
// more than its caching.
type cache struct {
	seed   maphash.Seed
	shards [cacheShards]shard
	per    int // entries per shard
}

type shard struct {
	mu  sync.RWMutex
	m   map[keyID]*entry
	gen uint64 // one more at each drop from the shard
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

// mark is the generation of the key's shard: taken before the key is read
// (or written), it lets put refuse what a drop since has made stale.
func (c *cache) mark(id keyID) uint64 {
	sh := c.shard(id)
	sh.mu.RLock()
	g := sh.gen
	sh.mu.RUnlock()
	return g
}

// put caches e unless the key's shard was dropped from since mark was
// taken, or it holds a later state of the key already.
func (c *cache) put(id keyID, e *entry, mark uint64) {
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.gen != mark {
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

// drop forgets the key's entry, if any, and returns it; a read of the key
// in progress does not cache what it read.
func (c *cache) drop(id keyID) *entry {
	sh := c.shard(id)
	sh.mu.Lock()
	sh.gen++
	e := sh.m[id]
	delete(sh.m, id)
	sh.mu.Unlock()
	return e
}

// dropTenant forgets the tenant's entries, and returns them; entries read
// before it are not put after it.
func (c *cache) dropTenant(tenant string) []*entry {
	var dropped []*entry
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		sh.gen++
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
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		sh.gen++
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
