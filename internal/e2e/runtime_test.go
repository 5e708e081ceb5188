package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/testnet"
	"github.com/keygate/keygate/jose"
)

// idp is a real JWKS endpoint whose key set can change under load.
type idp struct {
	srv     *httptest.Server
	jwks    atomic.Pointer[[]byte]
	fetches atomic.Int64
}

func newIDP(t *testing.T) *idp {
	t.Helper()
	i := &idp{}
	i.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=1")
		w.Write(*i.jwks.Load())
	}))
	t.Cleanup(i.srv.Close)
	return i
}

func (i *idp) publish(t *testing.T, signers ...*jose.Signer) {
	t.Helper()
	var ks []*jose.Key
	for _, s := range signers {
		ks = append(ks, s.Key())
	}
	b, err := jose.NewKeySet(ks...).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	i.jwks.Store(&b)
}

func ecSigner(t *testing.T, kid string) *jose.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jose.NewSigner(jose.ES256, kid, k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const idpIssuer = "https://idp.test/"

func idpToken(t *testing.T, s *jose.Signer, extra map[string]any) string {
	t.Helper()
	c := map[string]any{"iss": idpIssuer, "sub": "alice", "aud": "api", "exp": time.Now().Add(time.Hour).Unix(), "scope": "read"}
	for k, v := range extra {
		c[k] = v
	}
	tok, err := s.SignClaims(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func configYAML(jwksURL, extra string) string {
	return fmt.Sprintf(`
issuers:
  - issuer: %s
    jwks_url: %s
    algorithms: [ES256]
    audiences: [api]
    headers: {X-Auth-Subject: sub, X-Auth-Scopes: scope}
    jwks: {min_refresh: 200ms, refetch_interval: 100ms}
%s`, idpIssuer, jwksURL, extra)
}

type configured struct {
	*server.Server
	*node.Node
	path    string
	metrics *telemetry.Metrics
	url     string // traffic
	admin   string
	stop    func() // ends Serve and waits for it to return; Cleanup calls it too
}

// startConfigured runs a server from a configuration file on real listeners.
func startConfigured(t *testing.T, yaml string) *configured {
	t.Helper()
	return startConfiguredWith(t, yaml, nil)
}

// startConfiguredWith is startConfigured with the server's logs written to
// logs (text, debug level) when it is not nil.
func startConfiguredWith(t *testing.T, yaml string, logs io.Writer) *configured {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "keygate.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := telemetry.New()
	var log *slog.Logger
	if logs != nil {
		log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := server.New(context.Background(), server.Config{Gateway: cfg, ConfigPath: path, Metrics: m, Logger: log,
		Node: &node.Config{DataDir: filepath.Join(dir, "data"), Issuer: "http://self", Audience: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	admin, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, admin) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	t.Cleanup(func() {
		stop()
		s.Close()
	})
	return &configured{Server: s, Node: s.Node(), path: path, metrics: m, url: "http://" + ln.Addr().String(), admin: "http://" + admin.Addr().String(), stop: stop}
}

func get(t *testing.T, url, token string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestConfiguredIssuer(t *testing.T) {
	p := newIDP(t)
	k1 := ecSigner(t, "k1")
	p.publish(t, k1)
	c := startConfigured(t, configYAML(p.srv.URL, ""))

	code, h, _ := get(t, c.url+"/auth", idpToken(t, k1, nil))
	if code != 200 || h.Get("X-Auth-Subject") != "alice" || h.Get("X-Auth-Scopes") != "read" {
		t.Fatalf("valid token: %d %v", code, h)
	}
	// The dev key is not trusted once issuers are configured.
	devTok, _ := c.Mint(mint.Claims{Subject: "alice", Audience: []string{"x"}, TTL: time.Hour})
	if code, _, _ := get(t, c.url+"/auth", devTok); code != 401 {
		t.Errorf("dev token accepted with issuers configured: %d", code)
	}
	if code, _, body := get(t, c.admin+"/readyz", ""); code != 200 {
		t.Errorf("readyz %d %s", code, body)
	}
	code, _, body := get(t, c.admin+"/metrics", "")
	for _, want := range []string{`keygate_decisions_total{frontend="forward_auth",reason="",result="allow"} 1`,
		`keygate_jwks_fetches_total{issuer="https://idp.test/",result="ok"}`, "keygate_cache_entries 1",
		"keygate_cache_misses_total 2", `keygate_verify_seconds_count{alg="ES256"} 2`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if code, _, _ := get(t, c.admin+"/debug/pprof/", ""); code != 404 {
		t.Errorf("pprof index %d, want 404: profiles are off unless enabled", code)
	}
	// Admin endpoints are not on the traffic listener.
	if code, _, _ := get(t, c.url+"/metrics", ""); code != 404 {
		t.Errorf("/metrics on the traffic listener: %d", code)
	}
}

func TestReadyzWithoutKeys(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	c := startConfigured(t, configYAML(dead.URL, ""))
	code, _, body := get(t, c.admin+"/readyz", "")
	if code != 503 || !strings.Contains(body, idpIssuer) {
		t.Errorf("readyz with an unreachable JWKS: %d %s", code, body)
	}
	if code, _, _ := get(t, c.admin+"/healthz", ""); code != 200 {
		t.Errorf("healthz %d: liveness must not depend on the IdP", code)
	}
}

func TestReload(t *testing.T) {
	p := newIDP(t)
	k1 := ecSigner(t, "k1")
	p.publish(t, k1)
	c := startConfigured(t, configYAML(p.srv.URL, ""))
	tok := idpToken(t, k1, nil)
	if code, _, _ := get(t, c.url+"/auth", tok); code != 200 {
		t.Fatal("before reload")
	}

	// A broken file is refused; the running configuration keeps serving.
	os.WriteFile(c.path, []byte("issuers: [{issuer: x}]\n"), 0o600)
	if err := c.Reload(context.Background()); err == nil {
		t.Fatal("broken configuration accepted")
	}
	if code, _, _ := get(t, c.url+"/auth", tok); code != 200 {
		t.Fatal("old configuration stopped serving after a refused reload")
	}

	// A good file takes effect: the audience changes, a route appears.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream sub=%s", r.Header.Get("X-Auth-Subject"))
	}))
	defer up.Close()
	next := strings.Replace(configYAML(p.srv.URL, "routes:\n  - {path_prefix: /app, upstream: "+up.URL+"}\n"), "audiences: [api]", "audiences: [api2]", 1)
	get(t, c.url+"/auth", tok) // a cache hit
	body := scrape(t, c)
	hits, _ := metricValue(t, body, "keygate_cache_hits_total")
	misses, _ := metricValue(t, body, "keygate_cache_misses_total")
	if hits < 1 || misses < 1 {
		t.Fatalf("cache counters before the reload: hits %v, misses %v", hits, misses)
	}
	os.WriteFile(c.path, []byte(next), 0o600)
	if err := c.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The new runtime's cache starts empty, but the counters go on.
	body = scrape(t, c)
	if h, _ := metricValue(t, body, "keygate_cache_hits_total"); h < hits {
		t.Errorf("keygate_cache_hits_total went from %v to %v across a reload", hits, h)
	}
	if m, _ := metricValue(t, body, "keygate_cache_misses_total"); m < misses {
		t.Errorf("keygate_cache_misses_total went from %v to %v across a reload", misses, m)
	}
	if code, _, _ := get(t, c.url+"/auth", tok); code != 401 {
		t.Errorf("token for the old audience still accepted after reload: %d", code)
	}
	tok2 := idpToken(t, k1, map[string]any{"aud": "api2"})
	if code, _, body := get(t, c.url+"/app/x", tok2); code != 200 || body != "upstream sub=alice" {
		t.Errorf("proxy route after reload: %d %q", code, body)
	}
	get(t, c.url+"/app/x", tok2) // a hit in the new cache
	if h, _ := metricValue(t, scrape(t, c), "keygate_cache_hits_total"); h <= hits {
		t.Errorf("a hit after the reload did not count: keygate_cache_hits_total %v, %v before the reload", h, hits)
	}
	if !strings.Contains(scrape(t, c), `keygate_config_reloads_total{result="error"} 1`) {
		t.Error("refused reload not counted")
	}
}

// TestReloadOnFileChange: the watcher picks the new file up by itself.
func TestReloadOnFileChange(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: waits for the configuration watcher's poll; run without -short")
	}
	p := newIDP(t)
	k1 := ecSigner(t, "k1")
	p.publish(t, k1)
	c := startConfigured(t, configYAML(p.srv.URL, ""))
	tok2 := idpToken(t, k1, map[string]any{"aud": "api2"})
	time.Sleep(10 * time.Millisecond) // a different modification time
	os.WriteFile(c.path, []byte(strings.Replace(configYAML(p.srv.URL, ""), "audiences: [api]", "audiences: [api2]", 1)), 0o600)
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		if code, _, _ := get(t, c.url+"/auth", tok2); code == 200 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("file change not applied within 8s")
}

// TestRotationUnderLoad rotates the IdP's signing key while clients send a
// steady stream of requests, each token signed by whichever key the IdP
// currently signs with. The new key is published before it signs anything
// (as every real IdP does), and the old key stays published until its
// tokens are gone. No valid request may be refused.
func TestRotationUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: an IdP's key rotation under load; run without -short")
	}
	p := newIDP(t)
	k1, k2 := ecSigner(t, "k1"), ecSigner(t, "k2")
	p.publish(t, k1)
	c := startConfigured(t, configYAML(p.srv.URL, ""))

	var current atomic.Pointer[jose.Signer]
	current.Store(k1)
	var ok, refused atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				tok := idpToken(t, current.Load(), map[string]any{"jti": fmt.Sprintf("%d-%d", w, n)})
				req, _ := http.NewRequest("GET", c.url+"/auth", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					ok.Add(1)
				} else {
					refused.Add(1)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	p.publish(t, k1, k2) // pre-publish the new key
	time.Sleep(300 * time.Millisecond)
	current.Store(k2) // the IdP signs with k2; some gateways may not have refreshed yet
	time.Sleep(600 * time.Millisecond)
	p.publish(t, k2) // retire k1 once no k1 token is being sent
	time.Sleep(600 * time.Millisecond)
	stop()
	wg.Wait()
	if refused.Load() != 0 || ok.Load() < 100 {
		t.Fatalf("across the rotation: %d accepted, %d refused", ok.Load(), refused.Load())
	}
	t.Logf("across the rotation: %d accepted, 0 refused, %d JWKS fetches", ok.Load(), p.fetches.Load())
	// After retirement, a k1 token is refused even though k1 tokens were cached.
	deadline := time.Now().Add(5 * time.Second)
	old := idpToken(t, k1, nil)
	for time.Now().Before(deadline) {
		if code, _, _ := get(t, c.url+"/auth", old); code == 401 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Error("a token of the retired key is still accepted 5s after retirement")
}

func scrape(t *testing.T, c *configured) string {
	t.Helper()
	_, _, body := get(t, c.admin+"/metrics", "")
	return body
}

// TestReloadUnderLoad reloads the configuration again and again while
// clients send requests: none may fail or be refused.
func TestReloadUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: reloads under load; run without -short")
	}
	p := newIDP(t)
	k1 := ecSigner(t, "k1")
	p.publish(t, k1)
	c := startConfigured(t, configYAML(p.srv.URL, ""))
	tok := idpToken(t, k1, nil)
	var ok, bad atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequest("GET", c.url+"/auth", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				if err != nil {
					bad.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					ok.Add(1)
				} else {
					bad.Add(1)
				}
			}
		}()
	}
	for i := range 20 {
		// Alternate between two equivalent files so every reload builds
		// a new runtime (the cache size differs).
		os.WriteFile(c.path, []byte(configYAML(p.srv.URL, fmt.Sprintf("cache: {max_entries: %d}\n", 1000+i))), 0o600)
		if err := c.Reload(context.Background()); err != nil {
			t.Errorf("reload %d: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if bad.Load() != 0 || ok.Load() < 100 {
		t.Fatalf("during 20 reloads: %d answered 200, %d failed or refused", ok.Load(), bad.Load())
	}
	t.Logf("during 20 reloads: %d answered 200, none failed", ok.Load())
}

// TestShutdownDrains: a request in flight when shutdown begins still gets
// its answer, and new connections are refused afterwards.
func TestShutdownDrains(t *testing.T) {
	p := newIDP(t)
	k1 := ecSigner(t, "k1")
	p.publish(t, k1)
	started, release := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		io.WriteString(w, "finished")
	}))
	defer up.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "keygate.yaml")
	os.WriteFile(path, []byte(configYAML(p.srv.URL, "routes:\n  - {path_prefix: /, upstream: "+up.URL+"}\n")), 0o600)
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(context.Background(), server.Config{Gateway: cfg,
		Node: &node.Config{DataDir: filepath.Join(dir, "data"), Issuer: "http://self", Audience: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, nil) }()

	type answer struct {
		code int
		body string
	}
	got := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/slow", nil)
		req.Header.Set("Authorization", "Bearer "+idpToken(t, k1, nil))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{0, err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- answer{resp.StatusCode, string(b)}
	}()
	<-started
	cancel() // shutdown begins with the request in flight
	time.Sleep(100 * time.Millisecond)
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("new connections still accepted during shutdown")
	}
	close(release)
	if a := <-got; a.code != 200 || a.body != "finished" {
		t.Errorf("in-flight request: %d %q", a.code, a.body)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestOwnPathsOtherMethods: keygate's own endpoints answer another method
// with 405 and an Allow header, even when a route sends every other path
// to an upstream: GET /oauth2/token must not reach the upstream.
func TestOwnPathsOtherMethods(t *testing.T) {
	p := newIDP(t)
	k1 := ecSigner(t, "k1")
	p.publish(t, k1)
	var reached atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		io.WriteString(w, "upstream")
	}))
	defer up.Close()
	c := startConfigured(t, configYAML(p.srv.URL, "routes:\n  - {path_prefix: /, upstream: "+up.URL+", anonymous: true}\n"))
	tests := []struct{ method, path, allow string }{
		{"GET", "/oauth2/token", "POST"},
		{"PUT", "/oauth2/revoke", "POST"},
		{"GET", "/oauth2/introspect", "POST"},
		{"DELETE", "/v1/login", "POST"},
		{"POST", "/.well-known/jwks.json", "GET, HEAD"},
		{"POST", "/.well-known/openid-configuration", "GET, HEAD"},
		{"PATCH", "/.well-known/oauth-authorization-server", "GET, HEAD"},
		{"POST", "/healthz", "GET, HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, c.url+tt.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tt.allow {
				t.Errorf("%d, Allow %q; want 405, Allow %q", resp.StatusCode, resp.Header.Get("Allow"), tt.allow)
			}
		})
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests for keygate's own paths reached the upstream", n)
	}
	// The right methods still work, and other paths still reach the upstream.
	if code, _, _ := get(t, c.url+"/.well-known/jwks.json", ""); code != http.StatusOK {
		t.Errorf("GET jwks: %d", code)
	}
	if code, _, body := get(t, c.url+"/elsewhere", ""); code != http.StatusOK || body != "upstream" {
		t.Errorf("GET /elsewhere: %d %q, want the upstream", code, body)
	}
}

// startBehindCatchAll starts a dev node whose gateway sends every path it
// does not serve itself to an upstream, and returns the count of requests
// that reached the upstream.
func startBehindCatchAll(t *testing.T) (*live, *atomic.Int64) {
	t.Helper()
	reached := new(atomic.Int64)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		io.WriteString(w, "upstream")
	}))
	t.Cleanup(up.Close)
	gw := &config.Config{Routes: []config.Route{{PathPrefix: "/", Anonymous: true, Upstream: up.URL}}}
	gw.SetDefaults()
	return startLive(t, server.Config{Gateway: gw,
		Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true}}), reached
}

// TestTransitSpellingsStayOwn: a spelling of a transit path with dot or
// empty segments is keygate's, as ServeMux read it: redirected to the
// clean path, never forwarded by a catch-all route to the upstream with
// the client's transit token (X-Vault-Token) and plaintext.
func TestTransitSpellingsStayOwn(t *testing.T) {
	l, reached := startBehindCatchAll(t)
	tok, err := l.Node.Mint(mint.Claims{Subject: "c", Audience: []string{testAudience}, Scope: "transit:random", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(l.base, "http://")
	send := func(target string) (int, http.Header, string) {
		return testnet.Exchange(t, addr, "POST "+target+" HTTP/1.1\r\nHost: api.example\r\nX-Vault-Token: "+tok+
			"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	}
	if st, _, body := send("/v1/transit/random"); st != http.StatusOK || !strings.Contains(body, "random_bytes") {
		t.Fatalf("/v1/transit/random: %d %s", st, body)
	}
	for _, target := range []string{"//v1/transit/random", "/v1//transit/random", "/./v1/transit/random",
		"/x/../v1/transit/random", "http://api.example//v1/transit/random"} {
		st, h, body := send(target)
		if st != http.StatusTemporaryRedirect || h.Get("Location") != "/v1/transit/random" {
			t.Errorf("%s: %d, Location %q, %q; want a redirect to /v1/transit/random", target, st, h.Get("Location"), body)
		}
	}
	// Encoded dots: the mux reads them as a segment of the name, no path
	// of keygate's.
	if st, _, body := send("/v1/x/%2e%2e/transit/random"); st != http.StatusNotFound {
		t.Errorf("/v1/x/%%2e%%2e/transit/random: %d %q, want keygate's 404", st, body)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d transit requests reached the upstream", n)
	}
	// Other paths still go to the upstream as sent.
	if st, _, body := send("/v1/transitx"); st != http.StatusOK || body != "upstream" {
		t.Errorf("/v1/transitx: %d %q, want the upstream", st, body)
	}
}

// TestAmbiguousPaths: from a configuration file, both front ends refuse a
// path that upstreams read in different ways, count it under
// reason="ambiguous_path" (a series that exists from the start), and honour
// the rules' path options.
func TestAmbiguousPaths(t *testing.T) {
	p := newIDP(t)
	k1 := ecSigner(t, "k1")
	p.publish(t, k1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "upstream "+r.RequestURI)
	}))
	defer up.Close()
	c := startConfigured(t, configYAML(p.srv.URL, `
forward_auth:
  rules:
    - {path_prefix: /public, anonymous: true, allow_path_params: true}
    - {path_prefix: /admin, scopes: [admin], case_insensitive: true}
    - {path_prefix: /}
routes:
  - {path_prefix: /public, anonymous: true, allow_path_params: true, upstream: `+up.URL+`}
  - {path_prefix: /files, allow_encoded_slashes: true, upstream: `+up.URL+`}
  - {path_prefix: /, upstream: `+up.URL+`}
`))
	for _, front := range []string{"forward_auth", "proxy"} {
		if want := `keygate_decisions_total{frontend="` + front + `",reason="ambiguous_path",result="deny"} 0`; !strings.Contains(scrape(t, c), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	tok := idpToken(t, k1, nil)
	auth := func(uri, token string) (int, string) {
		req, _ := http.NewRequest("GET", c.url+"/auth", nil)
		req.Header.Set("X-Forwarded-Uri", uri)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := auth("/public/..;/admin/x", ""); code != 403 || !strings.Contains(body, "ambiguous_path") {
		t.Errorf("forward-auth, /public/..;/admin/x: %d %s", code, body)
	}
	if code, _ := auth("/public/x;jsessionid=1", ""); code != 200 {
		t.Errorf("forward-auth, /public/x;jsessionid=1: %d", code)
	}
	if code, body := auth("/ADMIN/x", tok); code != 403 || !strings.Contains(body, "insufficient_scope") {
		t.Errorf("forward-auth, /ADMIN/x: %d %s", code, body)
	}
	if code, _, body := get(t, c.url+"/public/..;/admin/x", ""); code != 400 || !strings.Contains(body, "ambiguous_path") {
		t.Errorf("proxy, /public/..;/admin/x: %d %s", code, body)
	}
	if code, _, body := get(t, c.url+"/public/a/..;/x;jsessionid=1", ""); code != 200 || body != "upstream /public/x;jsessionid=1" {
		t.Errorf("proxy, /public/a/..;/x;jsessionid=1: %d %q", code, body)
	}
	if code, _, body := get(t, c.url+"/files/a%2fb", tok); code != 200 || body != "upstream /files/a%2Fb" {
		t.Errorf("proxy, /files/a%%2fb: %d %q", code, body)
	}
	m := scrape(t, c)
	for _, front := range []string{"forward_auth", "proxy"} {
		if want := `keygate_decisions_total{frontend="` + front + `",reason="ambiguous_path",result="deny"} 1`; !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
