package verifykeys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/jose"
)

func TestRemoteFirstFetch(t *testing.T) {
	t.Parallel()
	p := newIDP(t, serve(jwks("a", "b"), "Cache-Control", "max-age=300"))
	var rec recorder
	r := newTestRemote(t, RemoteConfig{URL: p.url(), OnFetch: rec.on})
	if got := r.Current(); got == nil || got.Len() != 0 {
		t.Fatalf("before Start: %v", got)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	set := r.Current()
	if kids(set) != "a,b" {
		t.Fatalf("keys %q", kids(set))
	}
	if k, err := set.ResolveKey("b", jose.ES256); err != nil || k.Thumbprint() != key("b").Thumbprint() {
		t.Errorf("ResolveKey(b): %v", err)
	}
	st := r.Status()
	if !st.Ready() || st.Keys != 2 || st.LastSuccess.IsZero() || st.LastError != nil || st.Stale {
		t.Errorf("status %+v", st)
	}
	ev := rec.last()
	if rec.results() != "ok" || ev.Keys != 2 || ev.URL != p.url() || ev.Discovery || ev.Duration <= 0 ||
		!ev.At.Equal(st.LastSuccess) {
		t.Errorf("events %+v", rec.events())
	}
	h := p.header()
	if h.Get("Accept") != "application/json" || h.Get("User-Agent") != "keygate" {
		t.Errorf("request header %v", h)
	}
	if r.URL() != p.url() {
		t.Errorf("URL %q", r.URL())
	}
	if err := r.Start(context.Background()); err == nil {
		t.Error("second Start succeeded")
	}
}

// closedPortURL is a loopback URL nothing listens on.
func closedPortURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/jwks"
}

// bigBody writes 50 MB (declared up front when withLength) until the client
// goes away, and closes done when it gives up.
func bigBody(withLength bool, done chan struct{}) http.HandlerFunc {
	const size = 50 << 20
	return func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		if withLength {
			w.Header().Set("Content-Length", fmt.Sprint(size))
		}
		chunk := []byte(`{"keys":[` + strings.Repeat(" ", 64<<10-9))
		for n := 0; n < size; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			chunk = []byte(strings.Repeat(" ", 64<<10))
		}
	}
}

// unusable is a JWKS none of whose keys can verify with Algorithms ES256.
var unusable = jwksOf(
	jwkWith("a", map[string]any{"use": "enc"}),
	jwkWith("b", map[string]any{"alg": "RS256"}),
	jwkWith("c", map[string]any{"key_ops": []string{"encrypt"}}),
	jwkWith("d", nil), // ES384, not allowed
	map[string]any{"kty": "nope", "kid": "e"},
)

// failures are the ways a fetch fails; each makes a fresh handler.
var failures = []struct {
	name    string
	handler func(done chan struct{}) http.HandlerFunc
	result  string
	is      error
}{
	{"500", func(chan struct{}) http.HandlerFunc { return status(500) }, ResultHTTPError, nil},
	{"404", func(chan struct{}) http.HandlerFunc { return status(404) }, ResultHTTPError, nil},
	{"slow", func(chan struct{}) http.HandlerFunc { return hang }, ResultTimeout, nil},
	{"garbage", func(chan struct{}) http.HandlerFunc { return serve([]byte("<html>hello</html>")) }, ResultBadJSON, nil},
	{"keys not an array", func(chan struct{}) http.HandlerFunc { return serve([]byte(`{"keys":"a"}`)) }, ResultBadJSON, nil},
	{"no keys member", func(chan struct{}) http.HandlerFunc { return serve([]byte(`{}`)) }, ResultBadJSON, nil},
	{"empty keys", func(chan struct{}) http.HandlerFunc { return serve([]byte(`{"keys":[]}`)) }, ResultNoKeys, ErrNoKeys},
	{"all keys unusable", func(chan struct{}) http.HandlerFunc { return serve(unusable) }, ResultNoKeys, ErrNoKeys},
	{"secret keys only", func(chan struct{}) http.HandlerFunc {
		return serve(jwksOf(map[string]any{"kty": "oct", "kid": "s", "k": strings.Repeat("A", 43)}))
	}, ResultNoKeys, ErrNoKeys},
	{"50 MB chunked", func(done chan struct{}) http.HandlerFunc { return bigBody(false, done) }, ResultTooLarge, ErrTooLarge},
	{"50 MB with length", func(done chan struct{}) http.HandlerFunc { return bigBody(true, done) }, ResultTooLarge, ErrTooLarge},
}

func TestRemoteFirstFetchFails(t *testing.T) {
	t.Parallel()
	for _, tt := range append(failures, struct {
		name    string
		handler func(done chan struct{}) http.HandlerFunc
		result  string
		is      error
	}{"endpoint down", nil, ResultNetwork, nil}) {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var url string
			done := make(chan struct{})
			if tt.handler == nil {
				url = closedPortURL(t)
			} else {
				url = newIDP(t, tt.handler(done)).url()
			}
			var rec recorder
			r := newTestRemote(t, RemoteConfig{URL: url, OnFetch: rec.on,
				Algorithms: []jose.Alg{jose.ES256}, Timeout: 200 * time.Millisecond})
			start := time.Now()
			err := r.Start(context.Background())
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("Start took %v", took)
			}
			var fe *FetchError
			if !errors.As(err, &fe) || fe.Result != tt.result {
				t.Fatalf("Start: %v, want a %s FetchError", err, tt.result)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("%v is not %v", err, tt.is)
			}
			if evs := rec.events(); len(evs) == 0 || evs[0].Result != tt.result {
				t.Errorf("events %+v", evs)
			}
			st := r.Status()
			if st.Ready() || st.LastError == nil || !st.LastSuccess.IsZero() || st.LastAttempt.IsZero() || st.Stale {
				t.Errorf("status %+v", st)
			}
			if set := r.Current(); set == nil || set.Len() != 0 {
				t.Errorf("Current %v", set)
			}
			if tt.result == ResultTooLarge {
				// The client hung up: the server's writes fail soon.
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					t.Error("the oversized response is still being written")
				}
			}
		})
	}
}

func TestRemoteKeepsLastGood(t *testing.T) {
	t.Parallel()
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newIDP(t, serve(jwks("a")))
			clock := newClock()
			var rec recorder
			r := newTestRemote(t, RemoteConfig{URL: p.url(), OnFetch: rec.on, Now: clock.Now,
				Algorithms: []jose.Alg{jose.ES256}, Timeout: 200 * time.Millisecond,
				DefaultRefresh: time.Minute})
			if err := r.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			p.set(tt.handler(make(chan struct{})))
			clock.Advance(2 * time.Minute) // past the refresh time
			if got := kids(r.Refetch(context.Background())); got != "a" {
				t.Errorf("after a failed fetch: keys %q", got)
			}
			if got := rec.results(); !strings.HasPrefix(got, "ok,"+tt.result) {
				t.Errorf("events %q", got)
			}
			st := r.Status()
			if !st.Ready() || st.LastError == nil || !st.Stale || st.LastAttempt.Equal(st.LastSuccess) {
				t.Errorf("status %+v", st)
			}
		})
	}
}

func TestRemoteSkipsUnusableKeys(t *testing.T) {
	t.Parallel()
	doc := jwksOf(append([]any{jwkWith("c", nil)}, mustKeys(unusable)...)...)
	p := newIDP(t, serve(doc))
	var logs logBuffer
	r := newTestRemote(t, RemoteConfig{URL: p.url(), Algorithms: []jose.Alg{jose.ES256}, Logger: logs.logger()})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := kids(r.Current()); got != "c" {
		t.Errorf("keys %q, want c", got)
	}
	out := logs.String()
	for _, want := range []string{"skipped", `not sig`, "ES384 is not an allowed algorithm", key("c").Thumbprint()} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

func mustKeys(doc []byte) []any {
	var d struct{ Keys []any }
	if err := json.Unmarshal(doc, &d); err != nil {
		panic(err)
	}
	return d.Keys
}

// TestRemoteLogsNoKeyMaterial checks that success, skipped keys, failures
// and key changes log thumbprints, never the keys' coordinates.
func TestRemoteLogsNoKeyMaterial(t *testing.T) {
	t.Parallel()
	p := newIDP(t, serve(jwksOf(jwkWith("a", nil), jwkWith("b", map[string]any{"use": "enc"}))))
	var logs logBuffer
	clock := newClock()
	r := newTestRemote(t, RemoteConfig{URL: p.url(), Logger: logs.logger(), Now: clock.Now,
		Algorithms: []jose.Alg{jose.ES256}})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.set(serve(jwks("c")))
	clock.Advance(time.Hour)
	r.Refetch(context.Background())
	p.set(serve(unusable))
	clock.Advance(time.Hour)
	r.Refetch(context.Background())
	out := logs.String()
	for _, kid := range []string{"a", "b", "c", "d"} {
		for _, coord := range []string{"x", "y"} {
			if v := jwkWith(kid, nil)[coord].(string); strings.Contains(out, v[:20]) {
				t.Errorf("log holds key %s's %s coordinate:\n%s", kid, coord, out)
			}
		}
	}
	if !strings.Contains(out, key("a").Thumbprint()) || !strings.Contains(out, "JWKS fetch failed") {
		t.Errorf("log lacks thumbprints or the failure:\n%s", out)
	}
}

// TestRemoteRefresh checks that a key removed at the identity provider is
// gone after the refresh its Cache-Control asks for, clamped both ways, and
// that the refresh makes exactly one request.
func TestRemoteRefresh(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		header []string
		cfg    RemoteConfig
		lo, hi time.Duration // when the removed key may disappear
	}{
		{"max-age honoured", []string{"Cache-Control", "max-age=1"},
			RemoteConfig{MinRefresh: 50 * time.Millisecond, MaxRefresh: time.Hour}, 900 * time.Millisecond, 2500 * time.Millisecond},
		{"max-age clamped up to MinRefresh", []string{"Cache-Control", "max-age=0"},
			RemoteConfig{MinRefresh: 300 * time.Millisecond, MaxRefresh: time.Hour}, 250 * time.Millisecond, 1500 * time.Millisecond},
		{"no-cache means MinRefresh", []string{"Cache-Control", "no-cache, max-age=3600"},
			RemoteConfig{MinRefresh: 300 * time.Millisecond, MaxRefresh: time.Hour}, 250 * time.Millisecond, 1500 * time.Millisecond},
		{"max-age clamped down to MaxRefresh", []string{"Cache-Control", "public, max-age=86400"},
			RemoteConfig{MinRefresh: 10 * time.Millisecond, MaxRefresh: 300 * time.Millisecond}, 250 * time.Millisecond, 1500 * time.Millisecond},
		{"Expires clamped down to MaxRefresh", []string{"Expires", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)},
			RemoteConfig{MinRefresh: 10 * time.Millisecond, MaxRefresh: 300 * time.Millisecond}, 250 * time.Millisecond, 1500 * time.Millisecond},
		{"no header means DefaultRefresh", nil,
			RemoteConfig{MinRefresh: 10 * time.Millisecond, DefaultRefresh: 300 * time.Millisecond}, 250 * time.Millisecond, 1500 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newIDP(t, serve(jwks("a", "b"), tt.header...))
			cfg := tt.cfg
			cfg.URL = p.url()
			r := newTestRemote(t, cfg)
			if err := r.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			p.set(serve(jwks("a"), tt.header...))
			eventually(t, tt.hi, "key b still served", func() bool { return kids(r.Current()) == "a" })
			if took := time.Since(start); took < tt.lo {
				t.Errorf("refreshed after %v, before %v", took, tt.lo)
			}
			if n := p.hits.Load(); n != 2 {
				t.Errorf("%d requests, want 2", n)
			}
		})
	}
}

func TestRemoteMaxStale(t *testing.T) {
	t.Parallel()
	p := newIDP(t, serve(jwks("a")))
	clock := newClock()
	var logs logBuffer
	r := newTestRemote(t, RemoteConfig{URL: p.url(), Now: clock.Now, Logger: logs.logger(),
		DefaultRefresh: time.Minute, MaxStale: time.Hour})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.set(status(503))
	clock.Advance(30 * time.Minute)
	if got := kids(r.Refetch(context.Background())); got != "a" {
		t.Fatalf("stale but within MaxStale: keys %q", got)
	}
	if st := r.Status(); !st.Ready() || !st.Stale {
		t.Errorf("status %+v", st)
	}
	clock.Advance(30*time.Minute + 59*time.Second) // 1 s before refresh time + MaxStale
	if got := kids(r.Current()); got != "a" {
		t.Fatalf("1 s before MaxStale ends: keys %q", got)
	}
	clock.Advance(time.Second)
	if set := r.Current(); set == nil || set.Len() != 0 {
		t.Fatalf("past MaxStale: keys %q", kids(set))
	}
	if st := r.Status(); st.Ready() || !st.Stale {
		t.Errorf("status %+v", st)
	}
	r.Refetch(context.Background()) // fails again, and says so
	if !strings.Contains(logs.String(), "serving no keys") {
		t.Errorf("no error logged on expiry:\n%s", logs.String())
	}
	p.set(serve(jwks("b")))
	eventually(t, 2*time.Second, "recovery not picked up", func() bool {
		clock.Advance(time.Minute) // past RefetchInterval
		return kids(r.Refetch(context.Background())) == "b"
	})
}

// TestRemoteRetriesWithBackoff checks that a failed fetch is retried soon,
// not after the refresh interval, and that recovery is picked up.
func TestRemoteRetriesWithBackoff(t *testing.T) {
	t.Parallel()
	p := newIDP(t, status(500))
	r := newTestRemote(t, RemoteConfig{URL: p.url(), MinRefresh: 40 * time.Millisecond, DefaultRefresh: time.Hour})
	if err := r.Start(context.Background()); err == nil {
		t.Fatal("Start succeeded against a 500")
	}
	eventually(t, 2*time.Second, "no retries", func() bool { return p.hits.Load() >= 3 })
	p.set(serve(jwks("a")))
	eventually(t, 2*time.Second, "recovery not picked up", func() bool { return r.Status().Ready() })
	n := p.hits.Load()
	time.Sleep(150 * time.Millisecond)
	if m := p.hits.Load(); m != n {
		t.Errorf("%d requests after success, within the hour-long refresh", m-n)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		n      int
		limit  time.Duration
		lo, hi time.Duration
	}{
		{1, 10 * time.Second, 500 * time.Millisecond, time.Second},
		{2, 10 * time.Second, time.Second, 2 * time.Second},
		{4, 10 * time.Second, 4 * time.Second, 8 * time.Second},
		{5, 10 * time.Second, 5 * time.Second, 10 * time.Second},
		{1000, 10 * time.Second, 5 * time.Second, 10 * time.Second},
		{1, 20 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond},
		{9, 20 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond},
	} {
		for range 50 {
			if d := backoff(tt.n, tt.limit); d < tt.lo || d > tt.hi {
				t.Errorf("backoff(%d, %v) = %v, want [%v, %v]", tt.n, tt.limit, d, tt.lo, tt.hi)
			}
		}
	}
}

func TestRefetchSharesOneFetch(t *testing.T) {
	t.Parallel()
	p := newIDP(t, serve(jwks("a")))
	r := newTestRemote(t, RemoteConfig{URL: p.url(), RefetchInterval: time.Hour})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h, arrived, release := gated(jwks("a", "b"))
	p.set(h)
	const callers = 200
	got := make([]string, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { got[i] = kids(r.Refetch(context.Background())) })
	}
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("no refetch reached the server")
	}
	time.Sleep(50 * time.Millisecond) // let the other callers join
	close(release)
	wg.Wait()
	if n := p.hits.Load(); n != 2 {
		t.Errorf("%d requests, want 2 (Start and one refetch)", n)
	}
	for i, k := range got {
		if k != "a,b" {
			t.Fatalf("caller %d got keys %q", i, k)
		}
	}
}

func TestRefetchRateLimit(t *testing.T) {
	t.Parallel()
	p := newIDP(t, serve(jwks("a")))
	clock := newClock()
	r := newTestRemote(t, RemoteConfig{URL: p.url(), Now: clock.Now, RefetchInterval: 10 * time.Second})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct {
		advance time.Duration
		hits    int64
	}{
		{0, 2},                           // the first refetch goes out
		{0, 2},                           // at once again: refused
		{9 * time.Second, 2},             // 9 s later: refused
		{time.Second, 3},                 // 10 s after the first: goes out
		{5 * time.Second, 3},             // refused
		{5*time.Second + time.Second, 4}, // goes out
	} {
		clock.Advance(step.advance)
		if got := kids(r.Refetch(context.Background())); got != "a" {
			t.Errorf("step %d: keys %q", i, got)
		}
		if n := p.hits.Load(); n != step.hits {
			t.Errorf("step %d: %d requests, want %d", i, n, step.hits)
		}
	}
}

func TestRefetchContextCancelled(t *testing.T) {
	t.Parallel()
	p := newIDP(t, serve(jwks("a")))
	r := newTestRemote(t, RemoteConfig{URL: p.url()})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h, arrived, release := gated(jwks("a", "b"))
	p.set(h)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if got := kids(r.Refetch(ctx)); got != "a" {
		t.Errorf("cancelled Refetch: keys %q", got)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("cancelled Refetch took %v", took)
	}
	<-arrived
	// The fetch carries on for a caller that waits.
	other := make(chan string)
	go func() { other <- kids(r.Refetch(context.Background())) }()
	time.Sleep(20 * time.Millisecond)
	close(release)
	if got := <-other; got != "a,b" {
		t.Errorf("waiting caller: keys %q", got)
	}
	if n := p.hits.Load(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// TestRemoteClose runs alone (not in parallel) so that it can count the
// goroutines left behind.
// gone fails t unless every goroutine of a source has ended. Close returns
// once they have all called wg.Done, which each does as it returns, so one
// may still be on its way out of the source's frames for a moment (seen on a
// loaded machine); a goroutine that stays is a leak.
func gone(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		g := goroutines("keys.(*Remote)")
		if g == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d goroutines of the source left after Close", g)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRemoteClose(t *testing.T) {
	before := goroutines("net/http.(*persistConn)")
	p := newIDP(t, serve(jwks("a"), "Cache-Control", "max-age=0"))
	r, err := NewRemote(RemoteConfig{URL: p.url(), MinRefresh: 10 * time.Millisecond, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "no background refreshes", func() bool { return p.hits.Load() >= 4 })
	if g := goroutines("keys.(*Remote)"); g == 0 {
		t.Fatal("the refresh loop is not found among the goroutines")
	}
	r.Close()
	n := p.hits.Load()
	gone(t)
	eventually(t, 2*time.Second, "client connections left open", func() bool {
		return goroutines("net/http.(*persistConn)") <= before
	})
	time.Sleep(100 * time.Millisecond)
	if got := r.Refetch(context.Background()); kids(got) != "a" {
		t.Errorf("after Close: keys %q", kids(got))
	}
	if m := p.hits.Load(); m != n {
		t.Errorf("%d requests after Close", m-n)
	}
	if err := r.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v", err)
	}
	r.Close() // twice is fine

	// Close abandons a fetch in flight, and Start returns.
	p2 := newIDP(t, hang)
	r2, err := NewRemote(RemoteConfig{URL: p2.url(), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error)
	go func() { started <- r2.Start(context.Background()) }()
	eventually(t, 2*time.Second, "no request", func() bool { return p2.hits.Load() == 1 })
	start := time.Now()
	r2.Close()
	if err := <-started; !errors.Is(err, ErrClosed) {
		t.Errorf("Start: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v", took)
	}
	gone(t)
}

func TestNewRemoteConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  RemoteConfig
		is   error
		ok   bool
	}{
		{"https", RemoteConfig{URL: "https://idp.example.com/jwks"}, nil, true},
		{"http loopback v4", RemoteConfig{URL: "http://127.0.0.1:8080/jwks"}, nil, true},
		{"http loopback v6", RemoteConfig{URL: "http://[::1]:8080/jwks"}, nil, true},
		{"http localhost", RemoteConfig{URL: "http://localhost/jwks"}, nil, true},
		{"no URL", RemoteConfig{}, nil, false},
		{"http elsewhere", RemoteConfig{URL: "http://idp.example.com/jwks"}, ErrInsecureURL, false},
		{"http to a loopback-looking name", RemoteConfig{URL: "http://127.0.0.1.example.com/jwks"}, ErrInsecureURL, false},
		{"relative", RemoteConfig{URL: "/jwks"}, nil, false},
		{"ftp", RemoteConfig{URL: "ftp://idp.example.com/jwks"}, nil, false},
		{"bad URL", RemoteConfig{URL: "https://idp.example.com/%zz"}, nil, false},
		{"negative timeout", RemoteConfig{URL: "https://x.example/j", Timeout: -1}, nil, false},
		{"negative MaxBody", RemoteConfig{URL: "https://x.example/j", MaxBody: -1}, nil, false},
		{"min over max", RemoteConfig{URL: "https://x.example/j", MinRefresh: time.Hour, MaxRefresh: time.Minute}, nil, false},
	} {
		r, err := NewRemote(tt.cfg)
		if (err == nil) != tt.ok || (tt.is != nil && !errors.Is(err, tt.is)) {
			t.Errorf("%s: %v", tt.name, err)
		}
		if r != nil {
			r.Close()
		}
	}
	r, err := NewRemote(RemoteConfig{URL: "https://x.example/j"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := r.cfg
	if c.MinRefresh != 10*time.Second || c.MaxRefresh != 24*time.Hour || c.DefaultRefresh != 5*time.Minute ||
		c.MaxStale != 24*time.Hour || c.Timeout != 5*time.Second || c.MaxBody != 1<<20 ||
		c.RefetchInterval != 10*time.Second || c.Client == nil || c.Logger == nil || c.Now == nil {
		t.Errorf("defaults %+v", c)
	}
	r2, err := NewRemote(RemoteConfig{URL: "https://x.example/j", MinRefresh: time.Hour, DefaultRefresh: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if r2.cfg.DefaultRefresh != time.Hour {
		t.Errorf("DefaultRefresh %v not clamped to MinRefresh", r2.cfg.DefaultRefresh)
	}
}

func TestFetchErrorRedactsPassword(t *testing.T) {
	t.Parallel()
	r := newTestRemote(t, RemoteConfig{URL: "http://user:hunter2@" + strings.TrimPrefix(closedPortURL(t), "http://")})
	err := r.Start(context.Background())
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(r.URL(), "hunter2") {
		t.Errorf("error %v, URL %s", err, r.URL())
	}
}

// TestCurrentAllocations pins the request path's cost: Current allocates
// nothing.
func TestCurrentAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race (.ci/run runs them)")
	}
	p := newIDP(t, serve(jwks("a")))
	r := newTestRemote(t, RemoteConfig{URL: p.url()})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = r.Current() }); n != 0 {
		t.Errorf("Current allocates %v objects", n)
	}
}

func BenchmarkRemoteCurrent(b *testing.B) {
	p := newIDP(b, serve(jwks("a")))
	r, err := NewRemote(RemoteConfig{URL: p.srv.URL + "/jwks", Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r.Current().Len() != 1 {
				b.Fatal("no key")
			}
		}
	})
}

// TestRemoteReportsSkippedKeysOnce: a key the JWKS keeps offering and
// keygate keeps leaving out is logged and reported (FetchEvent.Skipped) on
// the first fetch only, not on every refresh; a newly skipped key is
// reported when it appears, and one that comes back after leaving again.
func TestRemoteReportsSkippedKeysOnce(t *testing.T) {
	t.Parallel()
	withEnc := jwksOf(jwkWith("a", nil), jwkWith("d", nil), jwkWith("b", map[string]any{"use": "enc"}))
	p := newIDP(t, serve(withEnc, "Cache-Control", "max-age=0"))
	var logs logBuffer
	var rec recorder
	r := newTestRemote(t, RemoteConfig{URL: p.url(), MinRefresh: 20 * time.Millisecond, Logger: logs.logger(),
		Algorithms: []jose.Alg{jose.ES256}, OnFetch: rec.on})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "five fetches", func() bool { return len(rec.events()) >= 5 })
	skippedIn := func() (n int, reasons []string) {
		for _, ev := range rec.events() {
			for _, sk := range ev.Skipped {
				n++
				reasons = append(reasons, sk.KeyID+":"+string(sk.Reason))
			}
		}
		return n, reasons
	}
	if n, rs := skippedIn(); n != 2 || !slices.Contains(rs, "d:alg_not_allowed") || !slices.Contains(rs, "b:bad_use") {
		t.Fatalf("skipped keys reported %d times over %d fetches (%v), want d and b once each", n, len(rec.events()), rs)
	}
	if first := rec.events()[0]; len(first.Skipped) != 2 {
		t.Errorf("the first fetch reported %d skipped keys", len(first.Skipped))
	}
	out := logs.String()
	if c := strings.Count(out, "JWKS key skipped"); c != 2 {
		t.Errorf("%d skipped-key log lines over %d fetches, want 2:\n%s", c, len(rec.events()), out)
	}
	for _, want := range []string{"kid=d", "reason=alg_not_allowed", key("d").Thumbprint(), "level=WARN", "kid=b", "reason=bad_use"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}

	// d leaves the JWKS, then comes back: reported again once.
	p.set(serve(jwksOf(jwkWith("a", nil), jwkWith("b", map[string]any{"use": "enc"})), "Cache-Control", "max-age=0"))
	n := len(rec.events())
	eventually(t, 5*time.Second, "fetches without d", func() bool { return len(rec.events()) >= n+3 })
	p.set(serve(withEnc, "Cache-Control", "max-age=0"))
	n = len(rec.events())
	eventually(t, 5*time.Second, "fetches with d again", func() bool { return len(rec.events()) >= n+3 })
	if c, rs := skippedIn(); c != 3 {
		t.Errorf("after d left and came back: %d reports (%v), want 3", c, rs)
	}
}
