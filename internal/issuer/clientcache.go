package issuer

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// clientCacheTTL bounds how long a node keeps answering from a cached
// client after another node changed or deleted it, and from a cached "no
// such client" after another node created it. Changes made through this
// node's admin API take effect at once. A refresh, which grants for 30 days
// more, is decided on the client as read from the store during its request
// (refreshGrant).
const clientCacheTTL = 2 * time.Second

// maxCachedClients bounds the cache of clients, and maxMissingClients the
// cache of ids read as unknown; when either is full its expired entries are
// dropped, and if that frees less than a quarter it starts over. The second is apart so
// that requests naming random ids (at most the pre-authentication limit's
// store reads per address) cannot push real clients out, and both are
// keyed by a digest, so an id's length costs nothing: 10,000 entries are
// under 1 MiB. Only entries younger than clientCacheTTL count, so starting
// over takes 10,000 reads of unknown ids within 2 s, from 50 addresses or
// more at the default pre-authentication limit.
const (
	maxCachedClients  = 10_000
	maxMissingClients = 10_000
)

// clientCache keeps recently read clients, so that issuing a token does not
// read the store every time (a SQLite read costs about as much as half an
// ES256 signature), and recently read unknown ids, so that an id that does
// not exist is answered from memory on repeat just as one that does: client
// authentication takes the same path, and the same time, whether or not
// the id is known (see authenticate). Entries are keyed by the SHA-256 of
// the id (clientKey), and a lookup always probes both maps.
type clientCache struct {
	mu sync.RWMutex
	// gen counts forgets: a load that began before one does not cache
	// what it read, which may be what the change replaced.
	gen     uint64
	entries map[clientKey]client    // answered from memory until c.expires()
	missing map[clientKey]time.Time // id read as unknown → until when to say so
}

// clientKey is a client id as the cache keys it: a lookup that misses
// computes it once for both the probe and the load.
type clientKey [sha256.Size]byte

func keyOf(id string) clientKey { return sha256.Sum256([]byte(id)) }

// client is a client as authenticated, with the time its record was read:
// what the token endpoint issues is decided on the client as it was then,
// so client_credentials tokens carry that time as their iat (a revocation
// of the client made after the read covers them, whatever cache served it).
type client struct {
	store.Client
	readAt time.Time
	// fresh is set on the client load returns: it was read from the store
	// during this request. What the cache keeps never has it.
	fresh bool
	// presented is the digest of the secret the request authenticated
	// with, set on the client authenticate returns (never on a cached one),
	// for a refresh to check it again against the client as stored now.
	presented [sha256.Size]byte
}

// expires is when a cached client stops being answered from memory.
func (c client) expires() time.Time { return c.readAt.Add(clientCacheTTL) }

// cached answers from memory: ok is set when the id keyed k was read less
// than clientCacheTTL ago, and then err is store.ErrNotFound if it was
// unknown.
func (cc *clientCache) cached(k clientKey, now time.Time) (c client, ok bool, err error) {
	cc.mu.RLock()
	e, known := cc.entries[k]
	until, unknown := cc.missing[k]
	cc.mu.RUnlock()
	switch {
	case known && now.Before(e.expires()):
		return e, true, nil
	case unknown && now.Before(until):
		return client{}, true, store.ErrNotFound
	}
	return client{}, false, nil
}

// clientReader is what the cache reads clients from: the service's Store.
type clientReader interface {
	GetClient(ctx context.Context, id string) (store.Client, error)
}

// load reads the client id (keyed k) from the store, as of now, and caches
// what it found: the client, or that there is none (store.ErrNotFound,
// which it returns). Other errors are not cached. The client it returns is
// marked fresh.
func (cc *clientCache) load(ctx context.Context, st clientReader, id string, k clientKey, now time.Time) (client, error) {
	cc.mu.RLock()
	gen := cc.gen
	cc.mu.RUnlock()
	sc, err := st.GetClient(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return client{}, err
	}
	c := client{Client: sc, readAt: now, fresh: true}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.gen != gen {
		return c, err
	}
	// What was read replaces whatever the cache held on the id, which may
	// still be live when a refresh reads again a client authentication
	// answered from memory.
	if err != nil {
		delete(cc.entries, k)
		cc.missing = room(cc.missing, maxMissingClients, now, func(until time.Time) time.Time { return until })
		cc.missing[k] = now.Add(clientCacheTTL)
		return client{}, err
	}
	delete(cc.missing, k)
	cc.entries = room(cc.entries, maxCachedClients, now, client.expires)
	cc.entries[k] = client{Client: sc, readAt: now}
	return c, nil
}

// room returns m with room for one more entry: m itself when it has it,
// else m without its entries expired by now if that frees a quarter of it
// (so that the scan is paid for by as many inserts), else a new map. Caller
// holds cc.mu.
func room[V any](m map[clientKey]V, limit int, now time.Time, expires func(V) time.Time) map[clientKey]V {
	if m == nil {
		return make(map[clientKey]V)
	}
	if len(m) < limit {
		return m
	}
	for k, v := range m {
		if !now.Before(expires(v)) {
			delete(m, k)
		}
	}
	if len(m) <= limit-limit/4 {
		return m
	}
	return make(map[clientKey]V)
}

// forget drops what the cache holds on id after it changed here (created,
// updated, deleted, a new secret), and keeps loads already under way from
// caching what they read before the change.
func (cc *clientCache) forget(id string) {
	k := keyOf(id)
	cc.mu.Lock()
	cc.gen++
	delete(cc.entries, k)
	delete(cc.missing, k)
	cc.mu.Unlock()
}

// ForgetClient drops what the service holds in memory on the client id,
// after the admin API changed it (created, updated, deleted, a new secret),
// so that the change takes effect on this node at once; other nodes see it
// within clientCacheTTL.
func (s *Service) ForgetClient(id string) { s.clients.forget(id) }
