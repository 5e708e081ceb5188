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

// client is a client as authenticated, with the time its record was read:
// what the token endpoint issues is decided on the client as it was then,
// so client_credentials tokens carry that time as their iat (a revocation
// of the client made after the read covers them, whatever cache served it).
type client struct {
	store.Client
	readAt time.Time
}

type cachedClient struct {
	c       client
	expires time.Time
}

// cached returns the client id if it was read less than clientCacheTTL ago.
func (cc *clientCache) cached(id string, now time.Time) (client, bool) {
	cc.mu.RLock()
	e, ok := cc.entries[id]
	cc.mu.RUnlock()
	if ok && now.Before(e.expires) {
		return e.c, true
	}
	return client{}, false
}

// load reads the client id from the store, as of now, and caches it.
func (cc *clientCache) load(ctx context.Context, st store.Store, id string, now time.Time) (client, error) {
	sc, err := st.GetClient(ctx, id)
	if err != nil {
		return client{}, err
	}
	c := client{Client: sc, readAt: now}
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
