package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

func TestBenchExtauthz(t *testing.T) {
	h := newHarness(t)
	tokens := h.write("tokens.txt", []byte("tok-secret-1\ntok-secret-2\n\ntok-secret-3\n"))
	for _, mode := range []string{"grpc-noop", "grpc-es256"} {
		t.Run(mode, func(t *testing.T) {
			addr, stop := h.background("bench", "server", "--mode", mode, "--listen", "127.0.0.1:0")
			out := h.must("bench", "extauthz", "--target", addr, "--token-file", tokens, "--connections", "2", "--streams", "2",
				"--requests", "60", "--duration", "0s", "--warmup", "0s", "--path", "/orders?x=1", "-H", "X-Tenant: acme", "--json")
			if strings.Contains(out, "tok-secret") {
				t.Error("the output holds a token")
			}
			var rep loadgen.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if len(rep.Steps) != 1 || rep.Target.PoolSize != 3 || !strings.Contains(rep.Target.URL, "/envoy.service.auth.v3.Authorization/Check") {
				t.Fatalf("report %+v", rep)
			}
			if s := rep.Steps[0]; s.Requests != 60 || s.Status.S2xx != 60 || s.Errors.Total() != 0 || s.Connections != 2 {
				t.Errorf("step %+v", s)
			}
			table := h.must("bench", "extauthz", "--target", addr, "--token", "tok-secret", "--connections", "1,2",
				"--duration", "100ms", "--warmup", "0s")
			if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) < 4 || !strings.HasPrefix(lines[0], "bench load: GET grpc://"+addr) {
				t.Errorf("table:\n%s", table)
			}
			expect(t, stop(), ExitOK, "listening on h2c://"+addr, "")
		})
	}
}

func TestBenchExtauthzUsage(t *testing.T) {
	h := newHarness(t)
	tokens := h.write("tokens.txt", []byte("a\n"))
	empty := h.write("empty.txt", []byte("\n\n"))
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{nil, "--target is required"},
		{[]string{"--target", "nohost"}, "is not HOST:PORT"},
		{[]string{"--target", "127.0.0.1:1", "--token", "a", "--token-file", tokens}, "exclude each other"},
		{[]string{"--target", "127.0.0.1:1", "--streams", "0"}, "--streams must be positive"},
		{[]string{"--target", "127.0.0.1:1", "--connections", "0"}, "not a positive integer"},
		{[]string{"--target", "127.0.0.1:1", "--rate", "-1"}, "--rate"},
		{[]string{"--target", "127.0.0.1:1", "--duration", "0s"}, "--duration, --requests or both"},
		{[]string{"--target", "127.0.0.1:1", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"--target", "127.0.0.1:1", "--method", "G E T"}, "not an HTTP method"},
		{[]string{"--target", "127.0.0.1:1", "--path", "x"}, "--path must begin with /"},
		{[]string{"--target", "127.0.0.1:1", "--token", "a\nb"}, "line break"},
		{[]string{"--target", "127.0.0.1:1", "extra"}, "unexpected argument"},
	} {
		expect(t, h.run(append([]string{"bench", "extauthz"}, tt.args...)...), ExitUsage, "", tt.err)
	}
	expect(t, h.run("bench", "extauthz", "--target", "127.0.0.1:1", "--token-file", h.path("nope")), ExitFail, "", "no such file")
	expect(t, h.run("bench", "extauthz", "--target", "127.0.0.1:1", "--token-file", empty), ExitFail, "", "holds no token")
	expect(t, h.run("bench", "server", "--mode", "grpc-nope"), ExitUsage, "", "grpc-noop, grpc-es256")
}

func TestBenchLoadHTTP2(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	http1 := 0
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen[r.Header.Get("Authorization")]++
		if r.ProtoMajor != 2 || r.Header.Get("X-Tenant") != "acme" {
			http1++
		}
	}))
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Start()
	defer ts.Close()
	h := newHarness(t)
	tokens := h.write("tokens.txt", []byte("tok-a\ntok-b\n"))
	out := h.must("bench", "load", "--url", ts.URL+"/auth", "--http2", "--streams", "3", "--connections", "2",
		"--token-file", tokens, "-H", "X-Tenant: acme", "--requests", "40", "--duration", "0s", "--warmup", "0s", "--json")
	var rep loadgen.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.Target.PoolSize != 2 || len(rep.Steps) != 1 || rep.Steps[0].Requests != 40 || rep.Steps[0].Status.S2xx != 40 {
		t.Fatalf("report %+v", rep)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["Bearer tok-a"] != 20 || seen["Bearer tok-b"] != 20 || http1 != 0 {
		t.Errorf("tokens sent %v, %d requests not HTTP/2 or without the header", seen, http1)
	}
	// The same tokens over HTTP/1.1.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen["h1 "+r.Header.Get("Authorization")]++
	}))
	defer plain.Close()
	mu.Unlock()
	h.must("bench", "load", "--url", plain.URL+"/auth", "--token-file", tokens, "--connections", "2", "--requests", "10",
		"--duration", "0s", "--warmup", "0s")
	mu.Lock()
	if seen["h1 Bearer tok-a"] != 5 || seen["h1 Bearer tok-b"] != 5 {
		t.Errorf("tokens sent over HTTP/1.1 %v", seen)
	}
}

func TestBenchLoadHTTP2Usage(t *testing.T) {
	h := newHarness(t)
	tokens := h.write("tokens.txt", []byte("a\n"))
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"--streams", "2"}, "--streams needs --http2"},
		{[]string{"--http2", "--streams", "0"}, "--streams must be positive"},
		{[]string{"--token-file", tokens, "-H", "authorization: Bearer x"}, "do not give one with -H"},
	} {
		expect(t, h.run(append([]string{"bench", "load", "--url", "http://127.0.0.1:1/"}, tt.args...)...), ExitUsage, "", tt.err)
	}
	expect(t, h.run("bench", "load", "--url", "http://127.0.0.1:1/", "--token-file", h.path("nope")), ExitFail, "", "no such file")
}
