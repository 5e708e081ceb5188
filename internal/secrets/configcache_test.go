package secrets

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/rootkey/tenantkey"
)

// configCounter counts the store's reads of mount configurations.
type configCounter struct {
	Store
	reads atomic.Int64
}

func (c *configCounter) GetSecretConfig(ctx context.Context, tenant string) ([]byte, error) {
	c.reads.Add(1)
	return c.Store.GetSecretConfig(ctx, tenant)
}

// TestConfigCacheQueries: with the read cache on, writes read the mount
// configuration from the store once, not at each write; without it, at
// each write.
func TestConfigCacheQueries(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cacheBytes int64
		want       int64
	}{
		{"cache on", 0, 1},
		{"cache off", -1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKit(t)
			cs := &configCounter{Store: k.st}
			e, err := New(Options{Store: cs, Keys: k.keys, Now: k.clock.now, CacheBytes: tc.cacheBytes})
			must(t, "New", err)
			for range 3 {
				_, err := e.Write(ctx, def, "p", json.RawMessage(`{"a":1}`), nil)
				must(t, "Write", err)
			}
			if got := cs.reads.Load(); got != tc.want {
				t.Errorf("3 writes read the mount configuration %d times, want %d", got, tc.want)
			}
		})
	}
}

// TestConfigCacheFleet: two engines on one store and one fleet's notices.
// A change of the mount configuration at one applies to the other's next
// write once it hears of it (the notice, a tenant's deletion, a seal), or
// once what it cached is older than the max age when it heard nothing.
func TestConfigCacheFleet(t *testing.T) {
	const maxAge = time.Minute
	casRequired := MountConfig{CASRequired: true}
	cases := []struct {
		name string
		// change changes the configuration to cas_required as a, or
		// behind b's back, and makes b hear of it as the case says.
		change func(t *testing.T, k *kit, bs *bus)
		// stale: b's next write still applies the old configuration.
		stale bool
	}{
		{"notice", func(t *testing.T, k *kit, _ *bus) {
			must(t, "SetConfig", k.e.SetConfig(ctx, def, casRequired))
		}, false},
		{"notice missed (Redis down)", func(t *testing.T, k *kit, bs *bus) {
			bs.down = true
			must(t, "SetConfig", k.e.SetConfig(ctx, def, casRequired))
			bs.down = false
		}, true},
		{"notice missed, then the max age passes", func(t *testing.T, k *kit, bs *bus) {
			bs.down = true
			must(t, "SetConfig", k.e.SetConfig(ctx, def, casRequired))
			bs.down = false
			k.clock.add(maxAge + time.Second)
		}, false},
		{"tenant deleted", func(t *testing.T, k *kit, bs *bus) {
			must(t, "SetSecretConfig", k.st.SetSecretConfig(ctx, def, []byte(`{"cas_required":true}`)))
			for _, f := range bs.tenants {
				f(def)
			}
		}, false},
		{"sealed", func(t *testing.T, k *kit, bs *bus) {
			must(t, "SetSecretConfig", k.st.SetSecretConfig(ctx, def, []byte(`{"cas_required":true}`)))
			for _, f := range bs.seals {
				f()
			}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bs := &bus{}
			k := newKitWith(t, Options{Notices: bs, CacheMaxAge: maxAge})
			b, err := New(Options{Store: k.st, Keys: tenantkey.New(tenantkey.Config{Store: k.st, Root: k.ring}), Now: k.clock.now,
				Notices: bs, CacheMaxAge: maxAge})
			must(t, "New(b)", err)
			for _, e := range []*Engine{k.e, b} { // each caches the configuration: none
				_, err = e.Write(ctx, def, "p", json.RawMessage(`{"v":1}`), nil)
				must(t, "Write", err)
			}

			tc.change(t, k, bs)
			// a applies its own change (or what it heard) at once
			_, err = k.e.Write(ctx, def, "q", json.RawMessage(`{"v":1}`), nil)
			wantErr(t, "a.Write without cas", err, ErrCASRequired)
			if got, err := b.Config(ctx, def); err != nil || got != casRequired {
				t.Errorf("b.Config = %+v, %v; want %+v (read from the store)", got, err, casRequired)
			}
			_, err = b.Write(ctx, def, "p", json.RawMessage(`{"v":2}`), nil)
			if tc.stale {
				must(t, "b.Write with the old configuration (within the max age)", err)
				return
			}
			wantErr(t, "b.Write without cas", err, ErrCASRequired)
		})
	}
}
