package secrets

import (
	"context"
	"sync"
	"time"
)

// The mount configuration cache. A write applies the tenant's mount
// configuration (max_versions, cas_required, delete_version_after), which
// would otherwise cost a query of its own at every write. An engine with a
// read cache keeps each tenant's configuration as it read it, for at most
// the read cache's max age. SetConfig drops the tenant's entry here before
// it answers and announces the change on ConfigChannel, on which every
// node drops its own; a seal drops every entry, a tenant's deletion the
// tenant's. An entry is put only if nothing was dropped since the read it
// comes from began (the generation, as in the read cache). Reading the
// configuration (Config) always asks the store.

// ConfigChannel is the node notice channel on which a change of a
// tenant's mount configuration is announced: the payload is the tenant.
const ConfigChannel = "secrets.config"

// maxConfigEntries bounds the configuration cache: at that many tenants it
// starts over (an entry is a few dozen bytes; tenants are made by admins).
const maxConfigEntries = 1 << 16

type configCache struct {
	maxAge time.Duration

	mu  sync.RWMutex
	m   map[string]configEntry
	gen uint64 // one more at each drop
}

type configEntry struct {
	c      MountConfig
	loaded time.Time
}

func newConfigCache(maxAge time.Duration) *configCache {
	return &configCache{maxAge: maxAge, m: map[string]configEntry{}}
}

// get returns the tenant's configuration if an entry younger than maxAge
// at now holds it.
func (c *configCache) get(tenant string, now time.Time) (MountConfig, bool) {
	c.mu.RLock()
	e, ok := c.m[tenant]
	c.mu.RUnlock()
	if !ok || now.Sub(e.loaded) > c.maxAge {
		return MountConfig{}, false
	}
	return e.c, true
}

// mark is the generation, taken before a read of the store.
func (c *configCache) mark() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

// put keeps mc as the tenant's configuration read at loaded, unless an
// entry was dropped since mark.
func (c *configCache) put(tenant string, mc MountConfig, loaded time.Time, mark uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != mark {
		return
	}
	if len(c.m) >= maxConfigEntries {
		clear(c.m)
	}
	c.m[tenant] = configEntry{c: mc, loaded: loaded}
}

// drop forgets the tenant's configuration ("": every tenant's); a read in
// progress does not keep what it read.
func (c *configCache) drop(tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if tenant == "" {
		clear(c.m)
		return
	}
	delete(c.m, tenant)
}

// writeConfig is the mount configuration a write applies: the cached one,
// else the store's (kept in the cache when there is one).
func (e *Engine) writeConfig(ctx context.Context, tenant string) (MountConfig, error) {
	cc := e.configs
	if cc == nil {
		return e.config(ctx, tenant)
	}
	now := e.now()
	if mc, ok := cc.get(tenant, now); ok {
		return mc, nil
	}
	mark := cc.mark()
	mc, err := e.config(ctx, tenant)
	if err != nil {
		return MountConfig{}, err
	}
	cc.put(tenant, mc, now, mark)
	return mc, nil
}

// configChanged drops the tenant's configuration here and announces the
// change to the fleet. It runs after every attempt at a change, whether
// or not it was stored.
func (e *Engine) configChanged(ctx context.Context, tenant string) {
	if e.configs != nil {
		e.configs.drop(tenant)
	}
	if e.notices == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := e.notices.Publish(ctx, ConfigChannel, tenant); err != nil {
		e.log.Warn("announcing a mount configuration change failed; other nodes apply what they cached of it for at most the cache's max age",
			"tenant", tenant, "err", err)
	}
}

// configNotice drops the configuration of the tenant another node (or
// this one) changed.
func (e *Engine) configNotice(_ context.Context, tenant string) {
	if tenant == "" {
		e.cache.malformed.Add(1)
		e.log.Warn("malformed mount configuration notice ignored")
		return
	}
	e.configs.drop(tenant)
}
