package loadgen

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// rawServer answers every request (GET, no body) with a fixed empty 200,
// allocating nothing per request, so that what a benchmark or allocation
// test counts is the client's.
func rawServer(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				out := make([]byte, 0, 64*len(answer))
				matched := 0 // bytes of "\r\n\r\n" seen so far
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					ends := 0
					for _, ch := range buf[:n] {
						switch {
						case ch == "\r\n\r\n"[matched]:
							if matched++; matched == 4 {
								ends, matched = ends+1, 0
							}
						case ch == '\r':
							matched = 1
						default:
							matched = 0
						}
					}
					out = out[:0]
					for range ends {
						out = append(out, answer...)
					}
					if _, err := c.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

func runN(tb testing.TB, url string, n int64) *Result {
	res, err := Run(context.Background(), Config{Request: Request{URL: url}, Connections: 1, Requests: n})
	if err != nil {
		tb.Fatal(err)
	}
	if res.Status.S2xx != n || res.Errors.Total() != 0 {
		tb.Fatalf("%+v, errors %+v", res.Status, res.Errors)
	}
	return res
}

// TestRequestAllocations: the request loop allocates nothing per request;
// what a run allocates (connections, buffers, histogram) is the same for
// 100 requests or 2100.
func TestRequestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	if testing.Short() {
		t.Skip("short")
	}
	url := rawServer(t)
	small := testing.AllocsPerRun(5, func() { runN(t, url, 100) })
	large := testing.AllocsPerRun(5, func() { runN(t, url, 2100) })
	if perRequest := (large - small) / 2000; perRequest > 0.01 {
		t.Errorf("%.3f allocations per request (%v for 100 requests, %v for 2100)", perRequest, small, large)
	}
}

// BenchmarkClient compares the generator's request loop with net/http's
// client on one keep-alive connection, against the same allocation-free
// server: ns/op is one request and its answer, client and server together.
func BenchmarkClient(b *testing.B) {
	url := rawServer(b)
	b.Run("loadgen", func(b *testing.B) {
		b.ReportAllocs()
		runN(b, url, int64(b.N))
	})
	b.Run("net-http", func(b *testing.B) {
		c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		defer c.CloseIdleConnections()
		b.ReportAllocs()
		for b.Loop() {
			resp, err := c.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// BenchmarkRun is a closed-loop run against net/http's server, as
// 'keygate bench load' runs against 'keygate bench server --mode noop'.
func BenchmarkRun(b *testing.B) {
	ts := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer ts.Close()
	b.ReportAllocs()
	res, err := Run(context.Background(), Config{Request: Request{URL: ts.URL}, Connections: 8, Requests: int64(b.N)})
	if err != nil || res.Errors.Total() != 0 {
		b.Fatal(err, res.Errors)
	}
}
