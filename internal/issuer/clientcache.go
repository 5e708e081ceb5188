package issuer

import (
	"context"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// clientCacheTTL bounds how long a node keeps answering from a cached
// client after another node changed or deleted it. Changes made through this
// node's admin API take effect at once. A refresh, which grants for 30 days
// more, reads the client from the store besides (refreshGrant).
const clientCacheTTL = 2 * time.Second

// maxCachedClients bounds the cache; when it is full it starts over.
const maxCachedClients = 10_000

// clientCache keeps recently authenticated clients, so that issuing a token
// does not read the store every time (a SQLite read costs about as much as
// half an ES256 signature). Unknown clients are never cached.
type clientCache struct {
	mu      sync.RWMutex
	entries map[string]cachedClient
}

type cachedClient struct {
	c       store.Client
	expires time.Time
}

// cached returns the client id if it was read less than clientCacheTTL ago.
func (cc *clientCache) cached(id string, now time.Time) (store.Client, bool) {
	cc.mu.RLock()
	e, ok := cc.entries[id]
	cc.mu.RUnlock()
	if ok && now.Before(e.expires) {
		return e.c, true
	}
	return store.Client{}, false
}

// load reads the client id from the store and caches it.
func (cc *clientCache) load(ctx context.Context, st store.Store, id string, now time.Time) (store.Client, error) {
	c, err := st.GetClient(ctx, id)
	if err != nil {
		return c, err
	}
	cc.mu.Lock()
	if cc.entries == nil || len(cc.entries) >= maxCachedClients {
		cc.entries = make(map[string]cachedClient)
	}
	cc.entries[id] = cachedClient{c: c, expires: now.Add(clientCacheTTL)}
	cc.mu.Unlock()
	return c, nil
}

// forget drops a client after it changed here.
func (cc *clientCache) forget(id string) {
	cc.mu.Lock()
	delete(cc.entries, id)
	cc.mu.Unlock()
}
