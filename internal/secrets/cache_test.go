package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/rootkey/tenantkey"
)

// bus is a fleet's notices in memory: every engine subscribed hears every
// notice, at once, as with Redis; the node events are run by hand.
type bus struct {
	mu       sync.Mutex
	handlers map[string][]func(context.Context, string) // by channel
	seals    []func()
	tenants  []func(string)
	down     bool // Publish fails and nothing is delivered
}

func (b *bus) Subscribe(_ context.Context, channel string, h func(context.Context, string)) error {
	if channel != CacheChannel && channel != ConfigChannel {
		return fmt.Errorf("unexpected channel %q", channel)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.handlers == nil {
		b.handlers = map[string][]func(context.Context, string){}
	}
	b.handlers[channel] = append(b.handlers[channel], h)
	return nil
}

func (b *bus) Publish(ctx context.Context, channel, payload string) error {
	b.mu.Lock()
	hs, down := append([]func(context.Context, string){}, b.handlers[channel]...), b.down
	b.mu.Unlock()
	if down {
		return errors.New("redis is down")
	}
	for _, h := range hs {
		h(ctx, payload)
	}
	return nil
}

func (b *bus) OnSeal(f func())                { b.seals = append(b.seals, f) }
func (b *bus) OnTenantDeleted(f func(string)) { b.tenants = append(b.tenants, f) }

// reading is what a read answered, for comparing two engines' reads.
type reading struct {
	Data   string
	Meta   VersionMeta
	Custom map[string]string
	Err    string
}

func readOf(e *Engine, tenant, path string, version int) reading {
	s, err := e.Read(ctx, tenant, path, version)
	if err != nil {
		r := reading{Err: err.Error()}
		var g *GoneError
		if errors.As(err, &g) {
			r.Meta = g.Meta
		}
		return r
	}
	return reading{Data: string(s.Data), Meta: s.Meta, Custom: s.CustomMetadata}
}

// TestCacheOperations: after each change a cached engine reads every
// version of the path as an engine without a cache reads it from the
// store, and a second read of a live version comes from the cache.
func TestCacheOperations(t *testing.T) {
	type op func(t *testing.T, k *kit)
	three := func(t *testing.T, k *kit) {
		for i := 1; i <= 3; i++ {
			k.write(t, def, "p", fmt.Sprintf(`{"v":%d}`, i))
		}
	}
	cases := []struct {
		name string
		do   op
	}{
		{"nothing", func(t *testing.T, k *kit) {}},
		{"write", func(t *testing.T, k *kit) { k.write(t, def, "p", `{"v":"new"}`) }},
		{"write with cas", func(t *testing.T, k *kit) {
			_, err := k.e.Write(ctx, def, "p", json.RawMessage(`{"v":"cas"}`), ptr(3))
			must(t, "Write", err)
		}},
		{"write with a stale cas (refused)", func(t *testing.T, k *kit) {
			_, err := k.e.Write(ctx, def, "p", json.RawMessage(`{"v":"cas"}`), ptr(1))
			wantErr(t, "Write", err, ErrCASMismatch)
		}},
		{"patch", func(t *testing.T, k *kit) {
			_, err := k.e.Patch(ctx, def, "p", json.RawMessage(`{"w":1}`), nil)
			must(t, "Patch", err)
		}},
		{"delete the current", func(t *testing.T, k *kit) { must(t, "Delete", k.e.Delete(ctx, def, "p", nil)) }},
		{"delete version 1", func(t *testing.T, k *kit) { must(t, "Delete", k.e.Delete(ctx, def, "p", []int{1})) }},
		{"delete then undelete", func(t *testing.T, k *kit) {
			must(t, "Delete", k.e.Delete(ctx, def, "p", []int{2, 3}))
			for _, v := range []int{0, 1, 2, 3} {
				readOf(k.e, def, "p", v) // cache what can be
			}
			must(t, "Undelete", k.e.Undelete(ctx, def, "p", []int{3}))
		}},
		{"destroy the current", func(t *testing.T, k *kit) { must(t, "Destroy", k.e.Destroy(ctx, def, "p", []int{3})) }},
		{"destroy version 2", func(t *testing.T, k *kit) { must(t, "Destroy", k.e.Destroy(ctx, def, "p", []int{2})) }},
		{"max_versions trims", func(t *testing.T, k *kit) {
			must(t, "SetMetadata", k.e.SetMetadata(ctx, def, "p", MetadataUpdate{MaxVersions: ptr(1)}))
			k.write(t, def, "p", `{"v":4}`)
		}},
		{"custom metadata set", func(t *testing.T, k *kit) {
			must(t, "SetMetadata", k.e.SetMetadata(ctx, def, "p", MetadataUpdate{CustomMetadata: map[string]string{"owner": "ops"}}))
		}},
		{"custom metadata patched", func(t *testing.T, k *kit) {
			must(t, "SetMetadata", k.e.SetMetadata(ctx, def, "p", MetadataUpdate{CustomMetadata: map[string]string{"owner": "ops"}}))
			readOf(k.e, def, "p", 0)
			must(t, "PatchMetadata", k.e.PatchMetadata(ctx, def, "p", MetadataUpdate{CustomMetadata: map[string]string{"owner": "dev", "x": "y"}}))
		}},
		{"delete_version_after passes", func(t *testing.T, k *kit) {
			must(t, "SetMetadata", k.e.SetMetadata(ctx, def, "p", MetadataUpdate{DeleteVersionAfter: ptr(time.Minute)}))
			k.write(t, def, "p", `{"v":4}`)
			readOf(k.e, def, "p", 0)
			k.clock.add(2 * time.Minute)
		}},
		{"path erased", func(t *testing.T, k *kit) { must(t, "DeleteMetadata", k.e.DeleteMetadata(ctx, def, "p")) }},
		{"path erased and made again", func(t *testing.T, k *kit) {
			must(t, "DeleteMetadata", k.e.DeleteMetadata(ctx, def, "p"))
			k.write(t, def, "p", `{"v":"again 1"}`)
			k.write(t, def, "p", `{"v":"again 2"}`) // versions 1 and 2 again, other values
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := newKit(t)
			plain, err := New(Options{Store: k.st, Keys: k.keys, Now: k.clock.now, CacheBytes: -1})
			must(t, "New", err)
			three(t, k)
			for _, v := range []int{0, 1, 2, 3} {
				readOf(k.e, def, "p", v) // every version cached
			}
			c.do(t, k)
			hits := k.e.CacheStats().Hits
			for round := range 2 {
				for _, v := range []int{0, 1, 2, 3, 4} {
					got, want := readOf(k.e, def, "p", v), readOf(plain, def, "p", v)
					if !reflect.DeepEqual(got, want) {
						t.Errorf("read %d of version %d: cached engine %+v, store %+v", round+1, v, got, want)
					}
				}
			}
			if want := readOf(plain, def, "p", 0); want.Err == "" && k.e.CacheStats().Hits == hits {
				t.Errorf("no read came from the cache (stats %+v)", k.e.CacheStats())
			}
		})
	}
}

// TestCacheHitsAndMisses: the first read of a path misses and the next
// ones hit; a write drops the path, so the read after it misses.
func TestCacheHitsAndMisses(t *testing.T) {
	k := newKit(t)
	k.write(t, def, "p", `{"v":1}`)
	want := func(step string, hits, misses uint64) {
		t.Helper()
		if s := k.e.CacheStats(); s.Hits != hits || s.Misses != misses {
			t.Errorf("%s: %d hits, %d misses; want %d, %d", step, s.Hits, s.Misses, hits, misses)
		}
	}
	k.read(t, def, "p", 0)
	want("first read", 0, 1)
	k.read(t, def, "p", 0)
	k.read(t, def, "p", 1)
	want("two more", 2, 1)
	k.write(t, def, "p", `{"v":2}`)
	if s := k.read(t, def, "p", 0); string(s.Data) != `{"v":2}` {
		t.Fatalf("read after the write: %s", s.Data)
	}
	want("after a write", 2, 2)
	if s := k.e.CacheStats(); s.Entries != 1 || s.Bytes <= 0 {
		t.Errorf("stats %+v: want one entry", s)
	}
}

// TestCacheTenants: two tenants' same path are two entries, each read
// under its tenant; a tenant's deletion drops its entries alone.
func TestCacheTenants(t *testing.T) {
	b := &bus{}
	k := newKitWith(t, Options{Notices: b})
	k.tenant(t, "acme")
	k.write(t, def, "p", `{"who":"default"}`)
	k.write(t, "acme", "p", `{"who":"acme"}`)
	for range 2 {
		if s := k.read(t, def, "p", 0); string(s.Data) != `{"who":"default"}` {
			t.Errorf("default reads %s", s.Data)
		}
		if s := k.read(t, "acme", "p", 0); string(s.Data) != `{"who":"acme"}` {
			t.Errorf("acme reads %s", s.Data)
		}
	}
	if s := k.e.CacheStats(); s.Entries != 2 || s.Hits != 2 {
		t.Errorf("stats %+v: want 2 entries, 2 hits", s)
	}
	for _, f := range b.tenants {
		f("acme")
	}
	if s := k.e.CacheStats(); s.Entries != 1 {
		t.Errorf("after acme's deletion: %d entries, want 1", s.Entries)
	}
	for _, f := range b.seals {
		f()
	}
	if s := k.e.CacheStats(); s.Entries != 0 {
		t.Errorf("after a seal: %d entries, want 0", s.Entries)
	}
}

// TestCacheBound: the cache holds no more than its bytes, and a value
// larger than a shard's share is never cached (read from the store each
// time, correctly).
func TestCacheBound(t *testing.T) {
	k := newKitWith(t, Options{CacheBytes: 64 << 10})
	for i := range 200 {
		p := "p" + strconv.Itoa(i)
		k.write(t, def, p, `{"v":"`+string(make([]byte, 0))+strconv.Itoa(i)+`"}`)
		k.read(t, def, p, 0)
	}
	s := k.e.CacheStats()
	if s.Bytes > s.CapacityBytes || s.Entries == 0 || s.Entries >= 200 {
		t.Errorf("stats %+v: want some entries within %d bytes", s, s.CapacityBytes)
	}
	big := `{"v":"` + string(bytesOf('x', 8<<10)) + `"}`
	k.write(t, def, "big", big)
	for range 2 {
		if got := k.read(t, def, "big", 0); string(got.Data) != big {
			t.Fatal("the large value reads wrong")
		}
	}
	if s2 := k.e.CacheStats(); s2.Hits != s.Hits {
		t.Errorf("a value over a shard's share was served from the cache")
	}
}

func bytesOf(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

// TestCacheMissedNotice: a node that misses another's change notice
// (Redis down, or no fleet) serves what it cached for at most its max
// age, then reads the store again.
func TestCacheMissedNotice(t *testing.T) {
	b := &bus{}
	a := newKitWith(t, Options{Notices: b, CacheMaxAge: 10 * time.Second})
	other, err := New(Options{Store: a.st, Keys: tenantkey.New(tenantkey.Config{Store: a.st, Root: a.ring}), Now: a.clock.now, Notices: b})
	must(t, "New", err)
	a.write(t, def, "p", `{"v":1}`)
	a.read(t, def, "p", 0)
	b.down = true
	_, err = other.Write(ctx, def, "p", json.RawMessage(`{"v":2}`), nil) // its notice is lost
	must(t, "Write", err)
	if s := a.read(t, def, "p", 0); string(s.Data) != `{"v":1}` {
		t.Fatalf("before max age: %s; the notice was lost, want the cached {\"v\":1} (else this test proves nothing)", s.Data)
	}
	a.clock.add(11 * time.Second)
	if s := a.read(t, def, "p", 0); string(s.Data) != `{"v":2}` {
		t.Errorf("after max age: %s, want {\"v\":2}", s.Data)
	}
	b.down = false
	_, err = other.Write(ctx, def, "p", json.RawMessage(`{"v":3}`), nil)
	must(t, "Write", err)
	if s := a.read(t, def, "p", 0); string(s.Data) != `{"v":3}` {
		t.Errorf("after a notice: %s, want {\"v\":3}", s.Data)
	}

	// Erased and made again elsewhere, the notices lost: the new path has
	// a lower revision than the entry held, which expires, and the new
	// state is cached in its place.
	b.down = true
	must(t, "DeleteMetadata", other.DeleteMetadata(ctx, def, "p"))
	_, err = other.Write(ctx, def, "p", json.RawMessage(`{"v":"again"}`), nil)
	must(t, "Write", err)
	a.clock.add(11 * time.Second)
	if s := a.read(t, def, "p", 0); string(s.Data) != `{"v":"again"}` {
		t.Fatalf("after max age: %s, want the path made again", s.Data)
	}
	hits := a.e.CacheStats().Hits
	if s := a.read(t, def, "p", 0); string(s.Data) != `{"v":"again"}` || a.e.CacheStats().Hits != hits+1 {
		t.Errorf("the path made again: %s, %d hits; want it read from the cache", s.Data, a.e.CacheStats().Hits-hits)
	}
}

// TestCacheRace: readers never see a version older than one a writer had
// acknowledged before the read began, while writers, deleters and
// readers of other versions run at once.
func TestCacheRace(t *testing.T) {
	k := newKit(t)
	k.write(t, def, "p", `{"n":0}`)
	var acked atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	wg.Go(func() {
		for n := 1; n <= 150; n++ {
			vm, err := k.e.Write(ctx, def, "p", json.RawMessage(`{"n":`+strconv.Itoa(n)+`}`), nil)
			if err != nil {
				errs <- err
				break
			}
			acked.Store(int64(vm.Version))
		}
		close(stop)
	})
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				floor := acked.Load()
				s, err := k.e.Read(ctx, def, "p", 0)
				if err != nil {
					errs <- err
					return
				}
				var d struct{ N int64 }
				if err := json.Unmarshal(s.Data, &d); err != nil || int64(s.Meta.Version) < floor || d.N+1 != int64(s.Meta.Version) {
					errs <- fmt.Errorf("read version %d data %s after version %d was acknowledged", s.Meta.Version, s.Data, floor)
					return
				}
				readOf(k.e, def, "p", int(floor)-3) // older versions, cached beside
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := k.e.CacheStats(); s.Hits == 0 {
		t.Logf("no hit in the race (stats %+v)", s)
	}
}

// TestCacheHitAllocs: a read from the cache allocates the plaintext and
// the Secret, nothing else (one open under the tenant's data key, with
// the additional data bound when the entry was made).
func TestCacheHitAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without the race detector")
	}
	k := newKit(t)
	k.write(t, def, "bench/a", string(kib))
	k.read(t, def, "bench/a", 0)
	hits := k.e.CacheStats().Hits
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := k.e.Read(ctx, def, "bench/a", 0); err != nil {
			t.Fatal(err)
		}
	})
	if k.e.CacheStats().Hits-hits < 100 {
		t.Fatalf("the reads did not come from the cache: %+v", k.e.CacheStats())
	}
	if allocs > 2 {
		t.Errorf("a cache hit allocates %.0f times, want 2 (the plaintext, the Secret)", allocs)
	}
}

// TestCacheOffAnnounces: a node with its cache off still announces its
// changes, which the nodes with a cache drop.
func TestCacheOffAnnounces(t *testing.T) {
	b := &bus{}
	a := newKitWith(t, Options{Notices: b, CacheMaxAge: time.Hour})
	off, err := New(Options{Store: a.st, Keys: tenantkey.New(tenantkey.Config{Store: a.st, Root: a.ring}), Now: a.clock.now,
		Notices: b, CacheBytes: -1})
	must(t, "New", err)
	a.write(t, def, "p", `{"v":1}`)
	a.read(t, def, "p", 0)
	_, err = off.Write(ctx, def, "p", json.RawMessage(`{"v":2}`), nil)
	must(t, "Write", err)
	if s := a.read(t, def, "p", 0); string(s.Data) != `{"v":2}` {
		t.Errorf("after the cacheless node's write: %s", s.Data)
	}
	if s := off.CacheStats(); s != (CacheStats{}) {
		t.Errorf("a node without a cache has stats %+v", s)
	}
}
