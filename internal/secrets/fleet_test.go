package secrets

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/postgres"
	"github.com/keygate/keygate/internal/store/sqlite"
	"github.com/keygate/keygate/internal/testnet"
)

// TestCacheFleet: two nodes of a fleet (real Redis, the nodes' own notice
// channels) with engines on one store: a change at either is read at the
// other as soon as its notice arrives, long before the cache's max age
// (an hour here). On SQLite (one file, opened by each engine) and on
// PostgreSQL when DATABASE_URL is set.
func TestCacheFleet(t *testing.T) {
	redisURL, prefix := testnet.RedisPrefix(t)
	stores := map[string]func(t *testing.T) (store.Store, store.Store){
		"sqlite": func(t *testing.T) (store.Store, store.Store) {
			file := filepath.Join(t.TempDir(), "shared.db")
			a, err := sqlite.Open(ctx, file)
			must(t, "sqlite.Open", err)
			t.Cleanup(func() { a.Close() })
			b, err := sqlite.Open(ctx, file)
			must(t, "sqlite.Open", err)
			t.Cleanup(func() { b.Close() })
			return a, b
		},
		"postgres": func(t *testing.T) (store.Store, store.Store) {
			base := os.Getenv("DATABASE_URL")
			if base == "" {
				t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
			}
			url := testnet.PostgresSchema(t, base, "kg_secretfleet")
			a, err := postgres.Open(ctx, url)
			must(t, "postgres.Open", err)
			t.Cleanup(func() { a.Close() })
			b, err := postgres.Open(ctx, url)
			must(t, "postgres.Open", err)
			t.Cleanup(func() { b.Close() })
			return a, b
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			sa, sb := open(t)
			nodes := make([]*node.Node, 2)
			for i := range nodes {
				n, err := node.Open(t.Context(), node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: "https://keygate.test",
					Audience: "api", TokenService: config.TokenService{RedisURL: redisURL, RedisPrefix: prefix + name}})
				must(t, "node.Open", err)
				t.Cleanup(n.Close)
				nodes[i] = n
			}
			k := kitOnWith(t, sa, t.TempDir(), Options{Notices: nodes[0], CacheMaxAge: time.Hour})
			a := k.e
			b, err := New(Options{Store: sb, Keys: tenantkey.New(tenantkey.Config{Store: sb, Root: k.ring}), Now: k.clock.now,
				Notices: nodes[1], CacheMaxAge: time.Hour})
			must(t, "New(b)", err)
			// A subscription takes effect once Redis has it: announce a
			// change until b has heard one.
			deadline := time.Now().Add(10 * time.Second)
			for b.CacheStats().Drops == 0 {
				if time.Now().After(deadline) {
					t.Fatal("b heard no notice in 10 s")
				}
				a.changed(ctx, def, "probe")
				time.Sleep(50 * time.Millisecond)
			}
			// eventually waits for e to read want at path.
			eventually := func(what string, e *Engine, path string, want reading) {
				t.Helper()
				deadline := time.Now().Add(5 * time.Second)
				for {
					got := readOf(e, def, path, 0)
					if got.Data == want.Data && got.Err == want.Err {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: reads %+v, want %+v", what, got, want)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			k.write(t, def, "p", `{"v":1}`)
			eventually("b after a's first write", b, "p", reading{Data: `{"v":1}`})
			k.read(t, def, "p", 0)
			// The write's notice may reach b after b's first read: b caches
			// from a later read then.
			hits := b.CacheStats().Hits
			for i := 0; b.CacheStats().Hits == hits; i++ {
				if i == 100 {
					t.Fatal("no read of b came from its cache: the test proves nothing")
				}
				readOf(b, def, "p", 0)
				time.Sleep(5 * time.Millisecond)
			}

			k.write(t, def, "p", `{"v":2}`)
			eventually("b after a's write", b, "p", reading{Data: `{"v":2}`})

			_, err = b.Write(ctx, def, "p", json.RawMessage(`{"v":3}`), nil)
			must(t, "b.Write", err)
			eventually("a after b's write", a, "p", reading{Data: `{"v":3}`})

			must(t, "b.Delete", b.Delete(ctx, def, "p", nil))
			var g *GoneError
			deadline = time.Now().Add(5 * time.Second)
			for _, err := a.Read(ctx, def, "p", 0); !errors.As(err, &g); _, err = a.Read(ctx, def, "p", 0) {
				if time.Now().After(deadline) {
					t.Fatalf("a still reads a version b deleted: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
			}

			// Erased and made again: version numbers start over.
			readOf(b, def, "p", 2)
			must(t, "a.DeleteMetadata", a.DeleteMetadata(ctx, def, "p"))
			k.write(t, def, "p", `{"v":"again"}`)
			k.write(t, def, "p", `{"v":"again 2"}`)
			deadline = time.Now().Add(5 * time.Second)
			for {
				s, err := b.Read(ctx, def, "p", 2)
				if err == nil && string(s.Data) == `{"v":"again 2"}` {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("b reads version 2 of the path made again as %v %v", s, err)
				}
				time.Sleep(10 * time.Millisecond)
			}

			// b applied the mount configuration at its write above (and
			// kept it): a's change of it reaches b's next writes.
			must(t, "a.SetConfig", a.SetConfig(ctx, def, MountConfig{CASRequired: true}))
			deadline = time.Now().Add(5 * time.Second)
			for {
				_, err := b.Write(ctx, def, "cfg", json.RawMessage(`{"v":1}`), nil)
				if errors.Is(err, ErrCASRequired) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("b still writes without cas after a required it: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

var _ Notices = (*node.Node)(nil)
