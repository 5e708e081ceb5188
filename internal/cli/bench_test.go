package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/bench"
	"github.com/keygate/keygate/internal/bench/loadgen"
)

func TestBench(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		args   []string
		header string
		algs   []string
	}{
		{[]string{"bench", "verify", "--alg", "HS256", "--alg", "ES256,EdDSA", "--duration", "30ms", "--goroutines", "2"},
			"verifies/s", []string{"HS256", "ES256", "EdDSA"}},
		{[]string{"bench", "sign", "--alg", "RS256", "--duration", "30ms", "--goroutines", "1"},
			"signs/s", []string{"RS256"}},
	}
	for _, tt := range tests {
		t.Run(tt.args[1], func(t *testing.T) {
			out := h.must(tt.args...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 2+len(tt.algs) {
				t.Fatalf("want a heading, a header and %d rows:\n%s", len(tt.algs), out)
			}
			if f := strings.Fields(lines[1]); len(f) != 4 || f[1] != tt.header || f[2] != "ns/op" || f[3] != "allocs/op" {
				t.Errorf("header %q", lines[1])
			}
			for i, alg := range tt.algs {
				if f := strings.Fields(lines[2+i]); len(f) != 4 || f[0] != alg || f[1] == "0" {
					t.Errorf("row %q", lines[2+i])
				}
			}
		})
	}
}

func TestBenchUsage(t *testing.T) {
	h := newHarness(t)
	for _, args := range [][]string{
		{"--duration", "0s"},
		{"--goroutines", "0"},
		{"--alg", "none"},
		{"extra"},
	} {
		expect(t, h.run(append([]string{"bench", "verify"}, args...)...), ExitUsage, "", "")
	}
}

func TestBenchVerifyRaw(t *testing.T) {
	h := newHarness(t)
	out := h.must("bench", "verify", "--raw", "--duration", "30ms", "--goroutines", "1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a heading, a header and one row:\n%s", out)
	}
	if f := strings.Fields(lines[2]); len(f) != 4 || f[0] != "ES256" || f[1] == "0" {
		t.Errorf("row %q", lines[2])
	}
	expect(t, h.run("bench", "verify", "--raw", "--alg", "HS256"), ExitUsage, "", "ES256 only")
}

// background runs a command that listens (and reports it through the
// ready hook) until the returned stop is called.
func (h *harness) background(args ...string) (addr string, stop func() result) {
	h.t.Helper()
	var stdout, stderr syncBuffer
	a := h.app(&stdout, &stderr)
	ready := make(chan string, 1)
	a.ready = func(addr string) { ready <- addr }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- a.main(ctx, args) }()
	select {
	case addr = <-ready:
	case code := <-done:
		cancel()
		h.t.Fatalf("%v exited %d before listening:\n%s", args, code, stderr.String())
	case <-time.After(10 * time.Second):
		cancel()
		h.t.Fatalf("%v did not start listening", args)
	}
	return addr, func() result {
		cancel()
		select {
		case code := <-done:
			return result{code, stdout.String(), stderr.String()}
		case <-time.After(15 * time.Second):
			h.t.Fatalf("%v did not stop after cancel", args)
			return result{}
		}
	}
}

// TestBenchServer: a reference server answers 200 to the requests of
// keygate's load generator (bench load), refuses 403 a request without its
// marker as a proxy's auth subrequest would arrive, names its mode on every
// answer, says on stderr what it is, and listens on loopback only unless
// --allow-remote.
func TestBenchServer(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: starts the bench server in each mode; run without -short")
	}
	for _, mode := range []string{"noop", "es256"} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t)
			addr, stop := h.background("bench", "server", "--mode", mode, "--listen", "127.0.0.1:0")
			for _, marked := range []bool{false, true} {
				req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/auth", nil)
				req.Header.Set("Authorization", "Bearer not-checked")
				want := http.StatusForbidden
				if marked {
					req.Header.Set(loadgen.MarkerHeader, loadgen.Marker())
					want = http.StatusOK
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want || resp.Header.Get(bench.ServerHeader) != mode {
					t.Errorf("marker %v: status %d, %s %q; want %d naming the mode", marked, resp.StatusCode, bench.ServerHeader, resp.Header.Get(bench.ServerHeader), want)
				}
			}
			out := h.must("bench", "load", "--url", "http://"+addr+"/auth", "--connections", "2", "--requests", "50", "--duration", "0s", "--json")
			var rep loadgen.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Steps) != 1 || rep.Steps[0].Status.S2xx != 50 {
				t.Errorf("bench load against the reference: %v\n%s", err, out)
			}
			expect(t, stop(), ExitOK, "listening on http://"+addr, "NOT AN AUTHORIZER")
		})
	}
	h := newHarness(t)
	expect(t, h.run("bench", "server", "--mode", "nope"), ExitUsage, "", "--mode must be one of noop, es256")
	expect(t, h.run("bench", "server"), ExitUsage, "", "--mode must be one of")
	for _, mode := range []string{"noop", "grpc-noop"} {
		expect(t, h.run("bench", "server", "--mode", mode, "--listen", "0.0.0.0:0"), ExitFail, "", "refusing to serve the bench server on 0.0.0.0:0")
		expect(t, h.run("bench", "server", "--mode", mode, "--listen", "[::]:0", "--allow-remote", "--profiling"), ExitUsage, "", "not with --allow-remote")
		_, stop := h.background("bench", "server", "--mode", mode, "--listen", "0.0.0.0:0", "--allow-remote")
		expect(t, stop(), ExitOK, "", "WARNING: --allow-remote")
	}
}

func TestBenchTokens(t *testing.T) {
	h := newHarness(t)
	key := h.path("key.pem")
	h.must("keys", "generate", "--alg", "ES256", "--out", key)
	out := h.path("tokens.txt")
	const n = 50
	msg := h.must("bench", "tokens", "--key", key, "--n", strconv.Itoa(n), "--out", out, "--aud", "api-1", "--ttl", "10m")
	if !strings.Contains(msg, "wrote 50 ES256 tokens") {
		t.Errorf("stdout %q", msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	tokens := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	seen := map[string]bool{}
	for _, tok := range tokens {
		seen[tok] = true
	}
	if len(tokens) != n || len(seen) != n {
		t.Fatalf("%d lines, %d distinct; want %d", len(tokens), len(seen), n)
	}
	claims := decodeClaims(t, h.must("token", "verify", "--key", key, "--alg", "ES256",
		"--iss", "https://auth.example.com/", "--aud", "api-1", tokens[n-1]))
	if claims["sub"] == nil || claims["jti"] == nil || claims["tenant"] != "acme-eu-west" {
		t.Errorf("claims %v", claims)
	}
	if stdout := h.must("bench", "tokens", "--key", key, "--n", "2"); strings.Count(stdout, "\n") != 2 || !tokenLine.MatchString(stdout) {
		t.Errorf("stdout tokens %q", stdout)
	}
	expect(t, h.run("bench", "tokens", "--key", key, "--n", "1", "--out", out), ExitFail, "", "exists")
	for _, args := range [][]string{
		{"--n", "1"},
		{"--key", key},
		{"--key", key, "--n", "1", "--workers", "0"},
		{"--key", key, "--n", "1", "--ttl", "0s"},
	} {
		expect(t, h.run(append([]string{"bench", "tokens"}, args...)...), ExitUsage, "", "")
	}
}
