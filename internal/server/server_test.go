package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/node"

	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/jose"

	"github.com/keygate/keygate/internal/testnet"
)

const (
	testIssuer   = "https://keygate.test"
	testAudience = "api"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer = testnet.SyncBuffer

// fixture is a Server on a temporary data dir with a clock the test moves.
type fixture struct {
	*Server
	*node.Node
	dir  string
	logs *syncBuffer
	now  time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{dir: filepath.Join(t.TempDir(), "data"), logs: &syncBuffer{}, now: time.Unix(1_800_000_000, 0)}
	s, err := New(context.Background(), f.config())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.Server, f.Node = s, s.Node()
	t.Cleanup(s.Close)
	return f
}

func (f *fixture) config() Config {
	return Config{Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Now: func() time.Time { return f.now },
		Node: &node.Config{DataDir: f.dir, Issuer: testIssuer, Audience: testAudience}}
}

func (f *fixture) mint(t *testing.T, c mint.Claims) string {
	t.Helper()
	if c.TTL == 0 {
		c.TTL = time.Hour
	}
	if c.Audience == nil {
		c.Audience = []string{testAudience}
	}
	tok, err := f.Mint(c)
	if err != nil {
		t.Fatalf("Mint: %v", err)
	}
	return tok
}

func (f *fixture) get(path string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for k, vs := range header {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	f.Handler().ServeHTTP(rec, req)
	return rec
}

func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// tamper changes one character in the middle of the signature.
func tamper(token string) string {
	i := len(token) - 20
	c := byte('A')
	if token[i] == 'A' {
		c = 'B'
	}
	return token[:i] + string(c) + token[i+1:]
}

func TestHealthz(t *testing.T) {
	f := newFixture(t)
	rec := f.get("/healthz", nil)
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != `{"status":"ok"}` {
		t.Fatalf("got %d %q", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}

func TestJWKS(t *testing.T) {
	f := newFixture(t)
	rec := f.get("/.well-known/jwks.json", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "public, max-age=300" {
		t.Errorf("Cache-Control %q", cc)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	set, err := jose.ParseKeySet(rec.Body.Bytes())
	if err != nil {
		t.Fatalf("ParseKeySet: %v", err)
	}
	k, err := set.ResolveKey(f.Thumbprint(), jose.ES256)
	if err != nil {
		t.Fatalf("signing key not in JWKS: %v", err)
	}
	if k.Thumbprint() != f.Thumbprint() {
		t.Errorf("thumbprint %s, want %s", k.Thumbprint(), f.Thumbprint())
	}
	if strings.Contains(rec.Body.String(), `"d"`) {
		t.Error("JWKS carries a private member")
	}
	// A token the server mints verifies against its published JWKS.
	v, err := jose.NewVerifier(set, []jose.Alg{jose.ES256}, jose.Expected{}, jose.WithClock(func() time.Time { return f.now }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(f.mint(t, mint.Claims{Subject: "x"})); err != nil {
		t.Errorf("minted token does not verify against the JWKS: %v", err)
	}
}

func TestAuthAccepts(t *testing.T) {
	f := newFixture(t)
	tok := f.mint(t, mint.Claims{Subject: "alice", Scope: "read write"})
	for _, h := range []http.Header{bearer(tok), {"Authorization": {"bearer  " + tok}}} {
		rec := f.get("/auth", h)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d, body %s", rec.Code, rec.Body)
		}
		if got := rec.Header().Get("X-Auth-Subject"); got != "alice" {
			t.Errorf("X-Auth-Subject %q", got)
		}
		if got := rec.Header().Get("X-Auth-Scopes"); got != "read write" {
			t.Errorf("X-Auth-Scopes %q", got)
		}
	}
}

func TestAuthAcceptsWithinLeeway(t *testing.T) {
	f := newFixture(t)
	tok := f.mint(t, mint.Claims{Subject: "alice"})
	f.now = f.now.Add(time.Hour + 30*time.Second)
	if rec := f.get("/auth", bearer(tok)); rec.Code != http.StatusOK {
		t.Fatalf("status %d within leeway: %s", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
}

func TestAuthMissingToken(t *testing.T) {
	f := newFixture(t)
	for name, h := range map[string]http.Header{
		"none":  nil,
		"basic": {"Authorization": {"Basic YWxhZGRpbjpvcGVuc2VzYW1l"}},
	} {
		t.Run(name, func(t *testing.T) {
			rec := f.get("/auth", h)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("status %d", rec.Code)
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer realm="keygate"` {
				t.Errorf("challenge %q", got)
			}
			var body map[string]string
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["error"] == "" {
				t.Errorf("body %q: %v", rec.Body, err)
			}
		})
	}
}

func TestAuthRejects(t *testing.T) {
	f := newFixture(t)
	valid := f.mint(t, mint.Claims{Subject: "alice"})
	expired := f.mint(t, mint.Claims{Subject: "alice", TTL: time.Minute})
	f.now = f.now.Add(10 * time.Minute)
	tests := []struct {
		name   string
		header http.Header
		reason string
	}{
		{"bad signature", bearer(tamper(valid)), "bad_signature"},
		{"expired", bearer(expired), "expired"},
		{"wrong audience", bearer(f.mint(t, mint.Claims{Subject: "a", Audience: []string{"other"}})), "wrong_audience"},
		{"wrong issuer", bearer(f.mint(t, mint.Claims{Issuer: "https://evil.test", Subject: "a"})), "wrong_issuer"},
		{"garbage", bearer("not-a-token"), "malformed"},
		{"over the token size limit", bearer(strings.Repeat("a", jose.DefaultMaxTokenSize+1)), "too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := f.get("/auth", tt.header)
			checkInvalidToken(t, rec.Code, rec.Header(), rec.Body.Bytes(), tt.reason)
		})
	}
}

func checkInvalidToken(t *testing.T, code int, h http.Header, body []byte, reason string) {
	t.Helper()
	if code != http.StatusUnauthorized {
		t.Fatalf("status %d", code)
	}
	want := `Bearer realm="keygate", error="invalid_token", error_description="` + reason + `"`
	if got := h.Get("WWW-Authenticate"); got != want {
		t.Errorf("challenge %q\nwant      %q", got, want)
	}
	var raw map[string]string
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if raw["error"] != "invalid_token" || raw["error_description"] != reason || len(raw) != 2 {
		t.Errorf("body %s", body)
	}
}

func TestAuthHeadersCannotBeSplit(t *testing.T) {
	f := newFixture(t)
	tok := f.mint(t, mint.Claims{Subject: "eve\r\nX-Admin: yes", Scope: "a\nb"})
	rec := f.get("/auth", bearer(tok))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	// Control characters become spaces: the value stays on its line.
	if got := rec.Header().Get("X-Auth-Subject"); got != "eve  X-Admin: yes" {
		t.Errorf("X-Auth-Subject %q", got)
	}
	if got := rec.Header().Get("X-Auth-Scopes"); got != "a b" {
		t.Errorf("X-Auth-Scopes %q", got)
	}
	if _, ok := rec.Header()["X-Admin"]; ok {
		t.Error("a claim injected a header")
	}
}

func TestAuthBadRequests(t *testing.T) {
	f := newFixture(t)
	valid := f.mint(t, mint.Claims{Subject: "alice"})
	for name, h := range map[string]http.Header{
		"empty bearer": {"Authorization": {"Bearer "}},
		"two headers":  {"Authorization": {"Bearer " + valid, "Bearer " + valid}},
	} {
		t.Run(name, func(t *testing.T) {
			rec := f.get("/auth", h)
			if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Header().Get("WWW-Authenticate"), `error="invalid_request"`) {
				t.Fatalf("status %d, challenge %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

// TestAuthAnyMethod: nginx's auth_request subrequest keeps the client's
// method, so /auth must decide for POST as for GET.
func TestAuthAnyMethod(t *testing.T) {
	f := newFixture(t)
	req := httptest.NewRequest(http.MethodPost, "/auth", nil)
	req.Header.Set("Authorization", "Bearer "+f.mint(t, mint.Claims{Subject: "alice"}))
	rec := httptest.NewRecorder()
	f.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
}

func TestSigningKeyReused(t *testing.T) {
	f := newFixture(t)
	again, err := New(context.Background(), f.config())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Node().Thumbprint() != f.Thumbprint() {
		t.Fatalf("second New made a new key: %s != %s", again.Node().Thumbprint(), f.Thumbprint())
	}
	tok := f.mint(t, mint.Claims{Subject: "alice"})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/auth", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	again.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("token from the first server refused by the second: %d", rec.Code)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, "generated a dev root key") || !strings.Contains(logs, "dev root key loaded") {
		t.Errorf("logs do not record creation then reuse:\n%s", logs)
	}
}

func TestConcurrentFirstStartsAgree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cfg := Config{Node: &node.Config{DataDir: dir, Issuer: testIssuer, Audience: testAudience}}
	const n = 8
	thumbs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := New(context.Background(), cfg)
			if err == nil {
				thumbs[i] = s.Node().Thumbprint()
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("New %d: %v", i, errs[i])
		}
		if thumbs[i] != thumbs[0] {
			t.Fatalf("servers disagree on the key: %s != %s", thumbs[i], thumbs[0])
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".keygate-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

func TestDataDirPermissions(t *testing.T) {
	f := newFixture(t)
	for path, want := range map[string]os.FileMode{
		f.dir:                                  0o700,
		filepath.Join(f.dir, node.RootKeyFile): 0o600,
		filepath.Join(f.dir, node.AdminTokenFile): 0o600,
		filepath.Join(f.dir, node.StoreFile):      0o600,
	} {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v, want %v", path, got, want)
		}
	}
}

func TestExposedRootKeyRefused(t *testing.T) {
	f := newFixture(t)
	if err := os.Chmod(filepath.Join(f.dir, node.RootKeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := New(context.Background(), f.config()); err == nil {
		s.Close()
		t.Fatal("New accepted a world-readable root key")
	}
}

func TestNewRefuses(t *testing.T) {
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, node.RootKeyFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no data dir", Config{Node: &node.Config{Issuer: testIssuer, Audience: testAudience}}},
		{"no issuer", Config{Node: &node.Config{DataDir: t.TempDir(), Audience: testAudience}}},
		{"no audience", Config{Node: &node.Config{DataDir: t.TempDir(), Issuer: testIssuer}}},
		{"corrupt root key", Config{Node: &node.Config{DataDir: bad, Issuer: testIssuer, Audience: testAudience}}},
		{"unreachable database", Config{Node: &node.Config{DataDir: t.TempDir(), Issuer: testIssuer, Audience: testAudience,
			TokenService: config.TokenService{DatabaseURL: "postgres://127.0.0.1:1/none"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s, err := New(context.Background(), tt.cfg); err == nil {
				s.Close()
				t.Fatal("New succeeded")
			}
		})
	}
}

// serve runs f on a real listener until the returned stop is called; stop
// returns Serve's error.
func (f *fixture) serve(t *testing.T) (base string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- f.Serve(ctx, ln, nil) }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(ShutdownTimeout + 5*time.Second):
			return errors.New("Serve did not return after cancel")
		}
	}
	t.Cleanup(func() { stop() })
	return "http://" + ln.Addr().String(), stop
}

func TestServeAndShutdown(t *testing.T) {
	f := newFixture(t)
	base, stop := f.serve(t)
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz %d", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := client.Get(base + "/healthz"); err == nil {
		t.Error("server still answers after shutdown")
	}
	if !strings.Contains(f.logs.String(), "msg=stopped") {
		t.Errorf("no stop logged:\n%s", f.logs)
	}
}

func TestOversizedHeaders(t *testing.T) {
	f := newFixture(t)
	base, _ := f.serve(t)
	tests := []struct {
		name  string
		token string
		want  int
	}{
		// Under MaxHeaderBytes but over the token limit: a 401 naming the reason.
		{"token over limit", strings.Repeat("a", jose.DefaultMaxTokenSize+1), http.StatusUnauthorized},
		{"20 KiB token", strings.Repeat("a", 20<<10), http.StatusUnauthorized},
		{"60 KiB token", strings.Repeat("a", 60<<10), http.StatusUnauthorized},
		// Over MaxHeaderBytes: net/http refuses before the handler runs.
		{"header over limit", strings.Repeat("a", 4*MaxHeaderBytes), http.StatusRequestHeaderFieldsTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, base+"/auth", nil)
			req.Header.Set("Authorization", "Bearer "+tt.token)
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
			if tt.want == http.StatusUnauthorized {
				checkInvalidToken(t, resp.StatusCode, resp.Header, body, "too_large")
			}
		})
	}
}

func TestLogsHoldNoSecrets(t *testing.T) {
	f := newFixture(t)
	base, stop := f.serve(t)
	valid := f.mint(t, mint.Claims{Subject: "alice"})
	tokens := []string{valid, tamper(valid), f.mint(t, mint.Claims{Subject: "a", Audience: []string{"x"}})}
	for _, tok := range tokens {
		req, _ := http.NewRequest(http.MethodGet, base+"/auth", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	logs := f.logs.String()
	root, err := os.ReadFile(filepath.Join(f.dir, node.RootKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := os.ReadFile(filepath.Join(f.dir, node.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{"-----BEGIN", "PRIVATE KEY", strings.TrimSpace(string(root)), strings.TrimSpace(string(admin)),
		f.Bootstrap().DemoClientSecret}
	for _, tok := range tokens {
		forbidden = append(forbidden, tok, signature(tok))
	}
	for _, s := range forbidden {
		if strings.Contains(logs, s) {
			t.Errorf("logs contain %.40q…:\n%s", s, logs)
		}
	}
	if !strings.Contains(logs, "token="+gateway.Fingerprint(tamper(valid))) {
		t.Errorf("rejected token's fingerprint not logged:\n%s", logs)
	}
}

func signature(token string) string { return token[strings.LastIndexByte(token, '.')+1:] }

// oneKeyJWKS is a JWKS of one new ES256 key, kid k1, for a test that
// needs an issuer to trust but signs no token with it.
func oneKeyJWKS(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jose.NewSigner(jose.ES256, "k1", k)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := jose.NewKeySet(s.Key()).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return jwks
}
