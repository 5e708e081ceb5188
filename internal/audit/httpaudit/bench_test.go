package httpaudit

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/keygate/keygate/internal/httperr"
)

// discardWriter is a ResponseWriter that keeps nothing but its header.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }

var tokenBody = []byte(`{"access_token":"x","token_type":"Bearer","expires_in":900}`)

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	n := From(w)
	n.Client("kgc_orders")
	n.Key("kid-1", 0)
	n.Hash("jti", "a-jti")
	w.Header().Set("Content-Type", "application/json")
	w.Write(tokenBody)
})

// TestAllocations: wrapping a request costs two allocations in steady
// state (its id, and the X-Request-Id header's value; the third counted
// here is the handler's own Content-Type): the recorder, its header map,
// body buffer and digests are pooled, an HMAC allocates nothing, and
// neither does a Write to the log.
func TestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race (.ci/run runs them)")
	}
	f := newFixture(t, false)
	h := f.a.Handler("oauth2.token", httperr.Writer{}, okHandler)
	r := httptest.NewRequest(http.MethodPost, "/oauth2/token", nil)
	w := &discardWriter{h: http.Header{}}
	for range 10 {
		h.ServeHTTP(w, r)
	}
	if n := testing.AllocsPerRun(200, func() { h.ServeHTTP(w, r) }); n > 3 {
		t.Errorf("an audited request allocates %v times, want at most 3", n)
	}
}

// BenchmarkHandler measures the wrapper around a handler that answers a
// token response, writing to an in-memory sink, from many goroutines (the
// log commits their records in groups):
//
//	go test -run '^$' -bench BenchmarkHandler -benchmem ./internal/httpaudit
func BenchmarkHandler(b *testing.B) {
	f := newFixture(b, false)
	h := f.a.Handler("oauth2.token", httperr.Writer{}, okHandler)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := httptest.NewRequest(http.MethodPost, "/oauth2/token", nil)
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			h.ServeHTTP(w, r)
			f.sink.mu.Lock()
			f.sink.buf.Reset()
			f.sink.mu.Unlock()
		}
	})
}
