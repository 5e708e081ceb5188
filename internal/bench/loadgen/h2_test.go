package loadgen

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// h2cServer is an HTTP server speaking only h2c with prior knowledge; it
// counts the requests it served by Authorization header and the
// connections it accepted.
type h2cServer struct {
	*httptest.Server
	mu     sync.Mutex
	tokens map[string]int
	conns  atomic.Int64
	http1  atomic.Int64
}

func newH2CServer(t *testing.T, h http.HandlerFunc) *h2cServer {
	t.Helper()
	s := &h2cServer{tokens: map[string]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			s.http1.Add(1)
		}
		s.mu.Lock()
		s.tokens[r.Header.Get("Authorization")]++
		s.mu.Unlock()
		if h != nil {
			h(w, r)
		}
	}))
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	s.Config.Protocols = p
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *h2cServer) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int, len(s.tokens))
	for k, v := range s.tokens {
		m[k] = v
	}
	return m
}

func TestRunHTTP2Pool(t *testing.T) {
	s := newH2CServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer t2" || r.Header.Get(MarkerHeader) != Marker() {
			w.WriteHeader(http.StatusUnauthorized) // t2, or a request without the benchmark marker
		}
		w.Write([]byte("answer body")) //nolint:errcheck // test
	})
	var pool []Request
	for _, tok := range []string{"t0", "t1", "t2"} {
		pool = append(pool, Request{URL: s.URL + "/auth", Header: []Header{{"Authorization", "Bearer " + tok}}})
	}
	res, err := RunHTTP2(t.Context(), Config{Pool: pool, Connections: 2, Requests: 300, Timeout: 5 * time.Second}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 300 || res.Status.S2xx != 200 || res.Status.S4xx != 100 || res.Errors.Total() != 0 {
		t.Errorf("requests %d, status %+v, errors %+v; want 300, 200 2xx and 100 4xx, no errors", res.Requests, res.Status, res.Errors)
	}
	if n := s.http1.Load(); n != 0 {
		t.Errorf("%d requests over HTTP/1", n)
	}
	if n := s.conns.Load(); n != 2 {
		t.Errorf("the server accepted %d connections, want 2", n)
	}
	got := s.counts()
	for _, tok := range []string{"t0", "t1", "t2"} {
		if got["Bearer "+tok] != 100 {
			t.Errorf("token %s sent %d times, want 100 (each in turn): %v", tok, got["Bearer "+tok], got)
		}
	}
	if res.Mode != ModeClosed || res.Connections != 2 || res.Latency.P50 <= 0 || res.Hist.Count() != 300 {
		t.Errorf("result %+v", res)
	}
}

func TestRunHTTP2Warmup(t *testing.T) {
	s := newH2CServer(t, nil)
	cfg := Config{Request: Request{URL: s.URL + "/", Header: []Header{{"Host", "api.example.com"}}}, Connections: 1,
		Warmup: 150 * time.Millisecond, Duration: 150 * time.Millisecond}
	res, err := RunHTTP2(t.Context(), cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	served := int64(0)
	for _, n := range s.counts() {
		served += int64(n)
	}
	if res.Requests == 0 || res.Requests >= served || res.Errors.Total() != 0 {
		t.Errorf("measured %d of %d served (errors %+v): the warm-up must be sent and left out", res.Requests, served, res.Errors)
	}
	if res.Seconds < 0.1 || res.Seconds > 0.3 {
		t.Errorf("measured window %.3f s, want about 0.15", res.Seconds)
	}
}

func TestRunHTTP2OpenLoop(t *testing.T) {
	s := newH2CServer(t, nil)
	cfg := Config{Request: Request{URL: s.URL + "/"}, Connections: 2, Rate: 400, Requests: 40}
	start := time.Now()
	res, err := RunHTTP2(t.Context(), cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != ModeOpen || res.Requests != 40 || res.TargetRate != 400 {
		t.Errorf("result %+v", res)
	}
	// 40 requests at 400/s take about 100 ms.
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Errorf("40 requests at 400/s took %v", d)
	}
}

func TestRunHTTP2Errors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: every connect fails
	res, err := RunHTTP2(t.Context(), Config{Request: Request{URL: "http://" + addr + "/"}, Connections: 1,
		Duration: 100 * time.Millisecond, Timeout: time.Second}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors.Connect == 0 || res.Requests != 0 {
		t.Errorf("errors %+v, requests %d: want connect errors only", res.Errors, res.Requests)
	}

	for _, tt := range []struct {
		cfg     Config
		streams int
		want    string
	}{
		{Config{Request: Request{URL: "http://x/"}, Connections: 1, Requests: 1}, 0, "streams"},
		{Config{Request: Request{URL: "https://x/"}, Connections: 1, Requests: 1}, 1, "https"},
		{Config{Request: Request{URL: "http://x/"}, Connections: 0, Requests: 1}, 1, "connections"},
	} {
		if _, err := RunHTTP2(context.Background(), tt.cfg, tt.streams); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("RunHTTP2(%+v, %d) = %v, want an error about %s", tt.cfg, tt.streams, err, tt.want)
		}
	}
}
