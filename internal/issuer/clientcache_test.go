package issuer

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/issuer/signingkeys"
	"github.com/keygate/keygate/internal/issuer/signingkeys/signingkeystest"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/sqlite"
)

// TestClientLookupSameShape: client authentication takes the same path for
// a known client_id and an unknown one, so that timing cannot tell them
// apart: repeated within clientCacheTTL, each costs one store read and one
// pre-authentication charge, the first time; after the TTL, one more each.
func TestClientLookupSameShape(t *testing.T) {
	f := newOAuthFixture(t)
	st := &countingStore{memStore: f.st}
	lim := &fixedLimiter{n: 1000, seen: map[string]int{}}
	svc, err := New(Config{Issuer: testIssuer, Store: st, Keys: f.keys, Now: func() time.Time { return f.clockNow }, PreAuthLimiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = svc.Handler()
	// Introspection: a 200 either way, whatever the client.
	ask := func(id, secret string) int {
		return f.post(t, "/oauth2/introspect", url.Values{"token": {"x"}}, [2]string{id, secret}, "").status
	}
	for round := range 2 {
		for _, c := range []struct {
			id, secret string
			status     int
		}{{"svc-a", f.secrets["svc-a"], 200}, {"kgc_nobody", "kgs_whatever", 401}} {
			before, charged := st.reads.Load(), lim.seen["preauth:ip:127.0.0.1"]
			for range 5 {
				if got := ask(c.id, c.secret); got != c.status {
					t.Fatalf("%s: %d, want %d", c.id, got, c.status)
				}
			}
			if n := st.reads.Load() - before; n != 1 {
				t.Errorf("round %d, %s five times within the TTL: %d store reads, want 1", round, c.id, n)
			}
			if n := lim.seen["preauth:ip:127.0.0.1"] - charged; n != 1 {
				t.Errorf("round %d, %s five times within the TTL: %d pre-authentication charges, want 1", round, c.id, n)
			}
		}
		f.clockNow = f.clockNow.Add(clientCacheTTL)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestUnknownClientCacheBounded: ids read as unknown are kept up to
// maxMissingClients, by digest, whatever their number or length; a forget
// keeps a load already under way from caching.
func TestUnknownClientCacheBounded(t *testing.T) {
	var cc clientCache
	st := &memStore{clients: map[string]store.Client{}}
	now := time.Unix(1_800_000_000, 0)
	load := func(st clientReader, id string, at time.Time) error {
		_, err := cc.load(context.Background(), st, id, keyOf(id), at)
		return err
	}
	long := strings.Repeat("x", 8<<10)
	for i := range maxMissingClients + 10 {
		if err := load(st, fmt.Sprint(long, i), now); err != store.ErrNotFound {
			t.Fatalf("load of an unknown id: %v", err)
		}
		if len(cc.missing) > maxMissingClients {
			t.Fatalf("%d unknown ids cached, more than %d", len(cc.missing), maxMissingClients)
		}
	}
	// Full, mostly of expired entries: those go, and the live one stays.
	cc = clientCache{}
	for i := range maxMissingClients - 1 {
		load(st, fmt.Sprint("kgc_", i), now) //nolint:errcheck // ErrNotFound
	}
	load(st, "kgc_recent", now.Add(clientCacheTTL/2)) //nolint:errcheck // ErrNotFound
	later := now.Add(clientCacheTTL)
	load(st, "kgc_live", later) //nolint:errcheck // ErrNotFound
	for _, id := range []string{"kgc_recent", "kgc_live"} {
		if _, ok, _ := cc.cached(keyOf(id), later); !ok {
			t.Errorf("%s: not cached after a full cache made room", id)
		}
	}
	if len(cc.missing) != 2 {
		t.Errorf("%d entries after making room, want 2", len(cc.missing))
	}
	// A forget between the store read and the insert: nothing cached.
	racing := &forgetOnRead{memStore: st, cc: &cc}
	if err := load(racing, "kgc_racing", now); err != store.ErrNotFound {
		t.Fatal(err)
	}
	if _, ok, _ := cc.cached(keyOf("kgc_racing"), now); ok {
		t.Error("a load that raced with forget cached what it read before the change")
	}
}

// forgetOnRead is a store whose client reads race with an admin change.
type forgetOnRead struct {
	*memStore
	cc *clientCache
}

func (s *forgetOnRead) GetClient(ctx context.Context, id string) (store.Client, error) {
	c, err := s.memStore.GetClient(ctx, id)
	s.cc.forget(id)
	return c, err
}

// BenchmarkClientLookup measures client authentication (authenticate)
// for a known client read lately and an unknown id named again: both are
// answered from memory, in about the same time:
//
//	go test -run '^$' -bench BenchmarkClientLookup -benchmem ./internal/issuer
func BenchmarkClientLookup(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "keygate.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	secret, _ := NewSecret(zeros{})
	d := SecretDigest(secret)
	if err := st.CreateClient(ctx, store.Client{ID: "kgc_known0000000000000", Name: "svc", SecretDigest: d[:], CreatedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	km := signingkeys.New(st, signingkeystest.NewSealer(b), signingkeys.Policy{}, nil)
	if err := km.Load(ctx); err != nil {
		b.Fatal(err)
	}
	svc, err := New(Config{Issuer: testIssuer, Store: st, Keys: km})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, id, secret string }{
		{"known", "kgc_known0000000000000", secret},
		{"unknown", "kgc_unknown00000000000", secret},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest("POST", "/oauth2/token", nil)
			r.SetBasicAuth(c.id, c.secret)
			v := url.Values{}
			b.ReportAllocs()
			for b.Loop() {
				svc.authenticate(ctx, r, v) //nolint:errcheck // the unknown id fails, as it should
			}
		})
	}
}
