package verifykeys

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/jose"
)

// testKeys are ES256 keys "a", "b", "c" and the ES384 key "d", made once.
var testKeys = sync.OnceValue(func() map[string]*jose.Key {
	m := map[string]*jose.Key{}
	for _, kid := range []string{"a", "b", "c", "d"} {
		curve, alg := elliptic.P256(), jose.ES256
		if kid == "d" {
			curve, alg = elliptic.P384(), jose.ES384
		}
		priv, err := ecdsa.GenerateKey(curve, rand.Reader)
		if err != nil {
			panic(err)
		}
		if m[kid], err = jose.NewKey(alg, kid, &priv.PublicKey); err != nil {
			panic(err)
		}
	}
	return m
})

func key(kid string) *jose.Key { return testKeys()[kid] }

// jwks is the JWKS document of the named test keys.
func jwks(kids ...string) []byte {
	var ks []*jose.Key
	for _, kid := range kids {
		ks = append(ks, key(kid))
	}
	b, err := jose.NewKeySet(ks...).MarshalJSON()
	if err != nil {
		panic(err)
	}
	return b
}

// jwkWith is the JWK of a test key with members replaced (nil deletes).
func jwkWith(kid string, members map[string]any) map[string]any {
	b, err := key(kid).MarshalJSON()
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	for k, v := range members {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

// jwksOf encodes JWKs as a JWKS document.
func jwksOf(keys ...any) []byte {
	if keys == nil {
		keys = []any{}
	}
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		panic(err)
	}
	return b
}

func kids(s *jose.KeySet) string {
	var ks []string
	for _, k := range s.Keys() {
		ks = append(ks, k.KeyID())
	}
	return strings.Join(ks, ",")
}

// idp is a fake identity provider on 127.0.0.1 whose behaviour a test can
// change while it runs.
type idp struct {
	srv  *httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	h    http.HandlerFunc
	hdr  http.Header // of the last request
}

func newIDP(t testing.TB, h http.HandlerFunc) *idp {
	t.Helper()
	p := &idp{h: h}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		p.mu.Lock()
		h := p.h
		p.hdr = r.Header.Clone()
		p.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *idp) set(h http.HandlerFunc) {
	p.mu.Lock()
	p.h = h
	p.mu.Unlock()
}

func (p *idp) header() http.Header {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hdr
}

func (p *idp) url() string { return p.srv.URL + "/jwks" }

// serve answers 200 with body and the header fields given as name, value
// pairs.
func serve(body []byte, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Add(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}
}

func status(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", code)
	}
}

// hang answers only when the request is abandoned or after 10 s.
func hang(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

// gated returns a handler that signals arrived on each request, then waits
// for release before serving body.
func gated(body []byte) (h http.HandlerFunc, arrived chan struct{}, release chan struct{}) {
	arrived, release = make(chan struct{}, 100), make(chan struct{})
	return func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
			_, _ = w.Write(body)
		case <-r.Context().Done():
		}
	}, arrived, release
}

// recorder collects FetchEvents.
type recorder struct {
	mu  sync.Mutex
	evs []FetchEvent
}

func (r *recorder) on(ev FetchEvent) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
}

func (r *recorder) events() []FetchEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]FetchEvent(nil), r.evs...)
}

func (r *recorder) results() string {
	var s []string
	for _, ev := range r.events() {
		if ev.Discovery {
			s = append(s, "discovery:"+ev.Result)
		} else {
			s = append(s, ev.Result)
		}
	}
	return strings.Join(s, ",")
}

func (r *recorder) last() FetchEvent {
	evs := r.events()
	if len(evs) == 0 {
		return FetchEvent{}
	}
	return evs[len(evs)-1]
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

var discard = slog.New(slog.DiscardHandler)

// newTestRemote makes a Remote that logs nowhere unless told and is closed
// when the test ends (before its identity provider, made earlier).
func newTestRemote(t *testing.T, cfg RemoteConfig) *Remote {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = discard
	}
	r, err := NewRemote(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// fakeClock is a settable clock.
type fakeClock struct{ ns atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// eventually polls cond every 5 ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// goroutines counts the goroutines whose stack mentions fn.
func goroutines(fn string) int {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}
