package verify

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/keygate/keygate/jose"
)

func TestCacheHitReturnsSameResult(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	tok := mint(t, e.a, e.aClaims)
	first, err := e.p.Verify(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := e.p.Verify(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		if again != first {
			t.Fatal("a hit returned another Result")
		}
	}
	if st := e.p.Stats(); st.Hits != 3 || st.Misses != 1 || st.Entries != 1 {
		t.Errorf("stats %+v, want 3 hits, 1 miss, 1 entry", st)
	}
}

func TestCacheLifetime(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		exp     time.Duration // token exp after t0
		maxTTL  time.Duration
		hitAt   time.Duration // still the cached result
		afterAt time.Duration // re-verified (or refused)
		want    string        // reason at afterAt
	}{
		{"entry ends at exp", 2 * time.Minute, 5 * time.Minute, 2*time.Minute - time.Second, 2 * time.Minute, "expired"},
		{"entry ends at MaxTTL", time.Hour, time.Minute, time.Minute - time.Second, time.Minute, ""},
		{"default MaxTTL 5 min", time.Hour, 0, 5*time.Minute - time.Second, 5 * time.Minute, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) {
				c.Cache.MaxTTL = tt.maxTTL
				c.Policies[0].Leeway = -1
			})
			tok := mint(t, e.a, e.aClaims.with("exp", t0.Add(tt.exp).Unix()))
			first, err := e.p.Verify(ctx, tok)
			if err != nil {
				t.Fatal(err)
			}
			e.clk.Advance(tt.hitAt)
			if r, err := e.p.Verify(ctx, tok); err != nil || r != first {
				t.Fatalf("at +%v: %v, same result %v; want the cached result", tt.hitAt, err, r == first)
			}
			e.clk.Advance(tt.afterAt - tt.hitAt)
			r, err := e.p.Verify(ctx, tok)
			if got := ReasonOf(err); got != tt.want {
				t.Fatalf("at +%v: reason %q (%v), want %q", tt.afterAt, got, err, tt.want)
			}
			if r == first {
				t.Fatalf("at +%v: still the cached result", tt.afterAt)
			}
			if st := e.p.Stats(); st.Misses != 2 {
				t.Errorf("%d misses, want 2", st.Misses)
			}
		})
	}
}

// TestCacheBounds floods the cache with distinct tokens and checks that
// neither bound is ever exceeded, sequentially and concurrently.
func TestCacheBounds(t *testing.T) {
	s := hmacSigner(t, "h", strings.Repeat("s", 32)) // cheap to sign
	tests := []struct {
		name       string
		maxEntries int
		maxBytes   int64
		workers    int
	}{
		{"entries", 100, 1 << 30, 1},
		{"bytes", 1 << 20, 64 << 10, 1},
		{"entries under concurrency", 100, 1 << 30, 8},
		{"bytes under concurrency", 1 << 20, 64 << 10, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustNew(t, Config{
				Policies: []Policy{{Issuer: issA, Keys: newSource(s.Key()), Algorithms: []jose.Alg{jose.HS256}}},
				Cache:    CacheConfig{MaxEntries: tt.maxEntries, MaxBytes: tt.maxBytes},
				Now:      newClock().Now,
			})
			const perWorker = 1000
			var wg sync.WaitGroup
			var failed atomic.Bool
			for w := range tt.workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perWorker {
						tok := mint(t, s, claims{"iss": issA, "exp": t0.Unix() + 3600, "jti": fmt.Sprint(w, "-", i),
							"pad": strings.Repeat("p", i%200)})
						if _, err := p.Verify(context.Background(), tok); err != nil {
							t.Error(err)
							return
						}
						if st := p.Stats(); st.Entries > tt.maxEntries || st.Bytes > tt.maxBytes {
							if failed.CompareAndSwap(false, true) {
								t.Errorf("bound exceeded: %+v", st)
							}
						}
					}
				}()
			}
			wg.Wait()
			st := p.Stats()
			if st.Entries == 0 || st.Evictions == 0 {
				t.Errorf("stats %+v: want a full cache that evicted", st)
			}
			if st.Entries > tt.maxEntries || st.Bytes > tt.maxBytes {
				t.Errorf("bound exceeded at the end: %+v", st)
			}
			// The accounting agrees with the entries held.
			var entries int
			var bytes int64
			for i := range p.cache.shards {
				sh := &p.cache.shards[i]
				if len(sh.index) != len(sh.ring) {
					t.Fatalf("shard %d: %d map entries, %d in the clock", i, len(sh.index), len(sh.ring))
				}
				for j, en := range sh.ring {
					if k, ok := sh.index[en.hash]; !ok || k != j {
						t.Fatalf("shard %d: clock slot %d is inconsistent", i, j)
					}
					bytes += en.size
				}
				entries += len(sh.ring)
			}
			if entries != st.Entries || bytes != st.Bytes {
				t.Errorf("accounting: %d entries, %d bytes; held %d, %d", st.Entries, st.Bytes, entries, bytes)
			}
		})
	}
}

// TestCacheClockKeepsHotTokens checks the eviction policy: a token hit
// between floods survives floods of one-off tokens.
func TestCacheClockKeepsHotTokens(t *testing.T) {
	s := hmacSigner(t, "h", strings.Repeat("s", 32))
	p := mustNew(t, Config{
		Policies: []Policy{{Issuer: issA, Keys: newSource(s.Key()), Algorithms: []jose.Alg{jose.HS256}}},
		Cache:    CacheConfig{MaxEntries: 16}, // one shard of 16
		Now:      newClock().Now,
	})
	ctx := context.Background()
	hot := mint(t, s, claims{"iss": issA, "exp": t0.Unix() + 3600, "jti": "hot"})
	first, err := p.Verify(ctx, hot)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if r, err := p.Verify(ctx, hot); err != nil || r != first {
			t.Fatalf("after %d one-off tokens the hot token was evicted", i)
		}
		tok := mint(t, s, claims{"iss": issA, "exp": t0.Unix() + 3600, "jti": fmt.Sprint(i)})
		if _, err := p.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCacheKeyLeavesSet(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		after func(t *testing.T, e *env) // changes A's key set
		want  string
		same  bool // the cached result still serves
	}{
		{"key removed", func(t *testing.T, e *env) { e.srcA.set(e.aRSA.Key()) }, "unknown_kid", false},
		{"set emptied", func(t *testing.T, e *env) { e.srcA.set() }, "unknown_kid", false},
		{"kid reused for another key", func(t *testing.T, e *env) {
			e.srcA.set(ecSigner(t, 2, "a1").Key(), e.aRSA.Key())
		}, "bad_signature", false},
		{"same key re-imported", func(t *testing.T, e *env) {
			k, err := jose.NewKey(jose.ES256, "a1", e.a.Key().Public())
			if err != nil {
				t.Fatal(err)
			}
			e.srcA.set(k, e.aRSA.Key())
		}, "", true},
		{"other tenant's set changes", func(t *testing.T, e *env) { e.srcB.set() }, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tok := mint(t, e.a, e.aClaims)
			first, err := e.p.Verify(ctx, tok)
			if err != nil {
				t.Fatal(err)
			}
			tt.after(t, e)
			r, err := e.p.Verify(ctx, tok)
			if got := ReasonOf(err); got != tt.want {
				t.Fatalf("reason %q (%v), want %q", got, err, tt.want)
			}
			if (r == first) != tt.same {
				t.Fatalf("cached result served: %v, want %v", r == first, tt.same)
			}
			if !tt.same && e.p.Stats().Entries != 0 {
				t.Error("the stale entry is still cached")
			}
		})
	}
}

// TestCacheCallerRewritesToken breaks string immutability the way a
// caller reusing a request buffer through unsafe would: after a token is
// cached, its memory is rewritten into a forged token of the same length.
// The forgery must not hit the entry, and the genuine token must still
// verify.
func TestCacheCallerRewritesToken(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	genuine := mint(t, e.a, e.aClaims)
	h, _, sig := segments(genuine)
	_, p2, _ := segments(mint(t, e.a, e.aClaims.with("sub", "admin")))
	forged := h + "." + p2 + "." + sig // "admin" is as long as "alice"
	if len(forged) != len(genuine) {
		t.Fatal("test tokens differ in length")
	}
	buf := []byte(genuine)
	aliased := unsafe.String(&buf[0], len(buf))
	if _, err := e.p.Verify(ctx, aliased); err != nil {
		t.Fatal(err)
	}
	copy(buf, forged)
	if res, err := e.p.Verify(ctx, forged); ReasonOf(err) != "bad_signature" {
		t.Fatalf("forged token written over a cached one: %v, %+v", err, res)
	}
	if _, err := e.p.Verify(ctx, aliased); ReasonOf(err) != "bad_signature" {
		t.Fatalf("rewritten cached token: %v", err)
	}
	res, err := e.p.Verify(ctx, genuine)
	if err != nil || res.Subject != "alice" {
		t.Fatalf("genuine token after the rewrite: %v", err)
	}
}

func TestEvict(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	toks := []string{
		mint(t, e.a, e.aClaims.with("jti", "1")),
		mint(t, e.a, e.aClaims.with("jti", "2")),
		mint(t, e.a, e.aClaims.with("jti", "3", "sub", "carol")),
		mint(t, e.b, e.bClaims.with("sub", "alice")),
	}
	for _, tok := range toks {
		if _, err := e.p.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.p.EvictID(issA, "2"); n != 1 {
		t.Errorf("EvictID dropped %d", n)
	}
	if n := e.p.EvictSubject(issA, "alice"); n != 1 { // jti 1; B's alice is another tenant's
		t.Errorf("EvictSubject dropped %d", n)
	}
	if n := e.p.Stats().Entries; n != 2 {
		t.Errorf("%d entries left, want 2", n)
	}
	if n := e.p.Evict(func(*Result) bool { return true }); n != 2 {
		t.Errorf("Evict(all) dropped %d", n)
	}
	misses := e.p.Stats().Misses
	if _, err := e.p.Verify(ctx, toks[0]); err != nil {
		t.Fatal(err)
	}
	if e.p.Stats().Misses != misses+1 {
		t.Error("an evicted token was still a hit")
	}
}

// awaitWaiters returns once n requests wait on token's flight.
func awaitWaiters(t *testing.T, p *Pipeline, token string, n int32) {
	t.Helper()
	s, h := p.cache.locate(token)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		f := s.flights[h]
		s.mu.Unlock()
		if f != nil && f.waiters.Load() == n {
			return
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d waiters never gathered", n)
}

func TestSingleflight(t *testing.T) {
	tests := []struct {
		name     string
		disabled bool
		forged   bool
	}{
		{"valid token, cache on", false, false},
		{"valid token, cache off", true, false},
		{"forged token", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var verifies atomic.Int32
			release := make(chan struct{})
			e := newEnv(t, func(c *Config) { c.Cache.Disabled = tt.disabled })
			e.p.onVerify = func() {
				verifies.Add(1)
				<-release
			}
			tok := mint(t, e.a, e.aClaims)
			if tt.forged {
				tok = mint(t, ecSigner(t, 2, "a1"), e.aClaims)
			}
			const n = 50
			results := make([]*Result, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i], errs[i] = e.p.Verify(context.Background(), tok)
				}()
			}
			awaitWaiters(t, e.p, tok, n-1)
			close(release)
			wg.Wait()
			if v := verifies.Load(); v != 1 {
				t.Fatalf("%d concurrent requests verified %d times, want once", n, v)
			}
			for i := range n {
				if results[i] != results[0] || !errors.Is(errs[i], errs[0]) {
					t.Fatalf("request %d got another outcome: %v", i, errs[i])
				}
			}
			if tt.forged != (errs[0] != nil) {
				t.Fatalf("outcome %v", errs[0])
			}
		})
	}
}

func TestSingleflightWaiterContext(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	e.p.onVerify = func() { <-release }
	tok := mint(t, e.a, e.aClaims)
	leader := make(chan error, 1)
	go func() {
		_, err := e.p.Verify(context.Background(), tok)
		leader <- err
	}()
	awaitWaiters(t, e.p, tok, 0) // the leader's flight exists
	// Wait on the leader's flight, then give up waiting.
	ctx, cancel := context.WithCancel(context.Background())
	waiter := make(chan error, 1)
	go func() {
		_, err := e.p.Verify(ctx, tok)
		waiter <- err
	}()
	awaitWaiters(t, e.p, tok, 1)
	cancel()
	if err := <-waiter; !errors.Is(err, context.Canceled) || ReasonOf(err) != "" {
		t.Fatalf("cancelled waiter: %v", err)
	}
	close(release)
	if err := <-leader; err != nil {
		t.Fatalf("leader: %v", err)
	}
}

func TestSingleflightPanicReleasesWaiters(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	e.p.onVerify = func() {
		<-release
		panic("key source exploded")
	}
	tok := mint(t, e.a, e.aClaims)
	go func() {
		defer func() { _ = recover() }()
		e.p.Verify(context.Background(), tok)
	}()
	awaitWaiters(t, e.p, tok, 0) // the leader's flight exists
	waiter := make(chan error, 1)
	go func() {
		_, err := e.p.Verify(context.Background(), tok)
		waiter <- err
	}()
	awaitWaiters(t, e.p, tok, 1)
	close(release)
	if err := <-waiter; err == nil {
		t.Fatal("waiter of a panicked verification was accepted")
	}
	e.p.onVerify = nil
	if _, err := e.p.Verify(context.Background(), tok); err != nil {
		t.Fatalf("after the panic the token no longer verifies: %v", err)
	}
}

// TestConcurrentLoad mixes hits, misses, forgeries, key rotation,
// revocation and eviction; it is for the race detector.
func TestConcurrentLoad(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Cache.MaxEntries = 64 })
	ctx := context.Background()
	var toks []string
	for i := range 40 {
		toks = append(toks, mint(t, e.a, e.aClaims.with("jti", fmt.Sprint(i), "sub", fmt.Sprint("u", i%5))))
	}
	toks = append(toks, mint(t, e.b, e.bClaims), mint(t, ecSigner(t, 2, "a1"), e.aClaims))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				res, err := e.p.Verify(ctx, toks[(i*7+w)%len(toks)])
				if err == nil && (res.Subject == "" || res.Token == nil) {
					t.Error("accepted result without contents")
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			switch i % 4 {
			case 0:
				e.srcA.set(e.aRSA.Key())
			case 1:
				e.srcA.set(e.a.Key(), e.aRSA.Key())
			case 2:
				e.rev.RevokeID(issA, fmt.Sprint(i%40), t0.Add(time.Hour))
				e.p.EvictID(issA, fmt.Sprint(i%40))
			case 3:
				e.p.Stats()
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
}

// TestCachedResultOutlivesCache: a cached Result lives in one allocation
// the collector does not scan, kept alive by whoever refers into it. A
// Result, or only a string or header value taken from one, must read the
// same after its entry is evicted, its token dropped, and the collector
// has run and the freed memory has been reused.
func TestCachedResultOutlivesCache(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Policies[0].Headers = []HeaderMapping{{"X-User", "sub"}, {"X-Roles", "roles"}, {"X-Note", "note"}}
	})
	ctx := context.Background()
	type held struct {
		res    *Result
		sub    string
		values []string
		want   string
	}
	snapshot := func(r *Result) string {
		s := fmt.Sprint(r.Issuer, "|", r.Subject, "|", r.ID, "|", r.Scope, "|", r.Expiry, "|", r.KeyID, "|",
			r.KeyThumbprint, "|", r.Token.Raw(), "|", string(r.Token.Claims.JSON()), "|", r.Token.Header.KeyID, "|",
			r.Token.Claims.Audience, "|", r.Token.Claims.Names())
		for i := range r.Headers {
			s += "|" + r.Headers[i].Name + "=" + r.Headers[i].Value + "=" + r.Headers[i].Values()[0]
		}
		return s
	}
	var keep []held
	for i := range 3 {
		tok := mint(t, e.a, e.aClaims.with("jti", fmt.Sprint("outlive-", i), "sub", fmt.Sprint("user-", i),
			"roles", []string{"admin", "billing"}, "note", "line\r\nbreak \u00e9"))
		res, err := e.p.Verify(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := e.p.Verify(ctx, tok); again != res {
			t.Fatal("not cached")
		}
		h := held{res: res, sub: res.Subject, values: res.Headers[1].Values(), want: snapshot(res)}
		if !strings.Contains(h.want, "X-Note=line  break \u00e9") || !strings.Contains(h.want, "X-Roles=admin,billing") {
			t.Fatalf("unexpected headers: %s", h.want)
		}
		switch i {
		case 1:
			h.res = nil // only the subject string and a header value keep it
		case 2:
			h.sub, h.values = "", nil // only the Result keeps it
		}
		keep = append(keep, h)
	}
	if n := e.p.Evict(func(*Result) bool { return true }); n != 3 {
		t.Fatalf("evicted %d", n)
	}
	var junk [][]byte
	for range 5 {
		runtime.GC()
		for range 2000 {
			b := make([]byte, 512+len(junk)%2048)
			for j := range b {
				b[j] = 0xA5
			}
			junk = append(junk, b)
		}
		junk = junk[len(junk)/2:]
	}
	for i, h := range keep {
		if h.res != nil {
			if got := snapshot(h.res); got != h.want {
				t.Errorf("result %d changed after eviction and collection:\n got %s\nwant %s", i, got, h.want)
			}
		}
		if h.sub != "" && h.sub != fmt.Sprint("user-", i) {
			t.Errorf("subject %d reads %q", i, h.sub)
		}
		if h.values != nil && (len(h.values) != 1 || h.values[0] != "admin,billing") {
			t.Errorf("header value %d reads %q", i, h.values)
		}
	}
	runtime.KeepAlive(junk)
}
