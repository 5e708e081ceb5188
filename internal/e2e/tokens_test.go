package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/testnet"
)

// live is a Server serving traffic and admin listeners on loopback.
type live struct {
	*server.Server
	*node.Node
	base, admin, probe string
	stop               func() error
}

func startLive(t *testing.T, cfg server.Config) *live {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adm, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Node != nil && cfg.Node.Issuer == "" {
		n := *cfg.Node
		n.Issuer = "http://" + ln.Addr().String()
		cfg.Node = &n
	}
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		ln.Close()
		adm.Close()
		probe.Close()
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.ServeListeners(ctx, server.Listeners{Traffic: ln, Admin: adm, Probe: probe}) }()
	l := &live{Server: s, Node: s.Node(), base: "http://" + ln.Addr().String(), admin: "http://" + adm.Addr().String(),
		probe: "http://" + probe.Addr().String()}
	stopped := false
	l.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		defer s.Close()
		select {
		case err := <-errc:
			return err
		case <-time.After(server.ShutdownTimeout + 5*time.Second):
			return errors.New("Serve did not return")
		}
	}
	t.Cleanup(func() { l.stop() })
	return l
}

// runEvery runs n's schedule every interval until ctx is done, as Run does
// every node.TickInterval.
func runEvery(ctx context.Context, n *node.Node, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.Tick(ctx)
		}
	}
}

func do(t *testing.T, method, url string, body string, h http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	// Generous: an unseal derives a 64 MiB Argon2id key, which under -race
	// with every package's tests sharing two cores has taken over 10 s.
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func form() http.Header {
	return http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
}

// clientToken gets an access token with client_credentials and
// client_secret_basic.
func clientToken(t *testing.T, base, id, secret string) string {
	t.Helper()
	h := form()
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	h.Set("Authorization", req.Header.Get("Authorization"))
	resp, body := do(t, http.MethodPost, base+"/oauth2/token", "grant_type=client_credentials", h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("token: %d %s", resp.StatusCode, body)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	if err := json.Unmarshal(body, &tr); err != nil || tr.AccessToken == "" {
		t.Fatalf("token response %s: %v", body, err)
	}
	return tr.AccessToken
}

// tokenServiceFlow is the dev-mode flow against cfg's store: demo client,
// token, /auth, revocation, admin API, restart.
func tokenServiceFlow(t *testing.T, cfg server.Config) {
	l := startLive(t, cfg)
	b := l.Bootstrap()
	if !b.Dev || b.DemoClientID == "" || b.DemoClientSecret == "" || b.AdminToken == "" {
		t.Fatalf("first dev start created no demo client or admin token: %+v", b)
	}
	kid := l.Thumbprint()
	tok := clientToken(t, l.base, b.DemoClientID, b.DemoClientSecret)

	resp, body := do(t, http.MethodGet, l.base+"/auth", "", bearer(tok))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Auth-Subject") != b.DemoClientID {
		t.Fatalf("/auth with an issued token: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if resp, body := do(t, http.MethodGet, l.base+"/.well-known/jwks.json", "", nil); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), kid) {
		t.Errorf("JWKS lacks kid %s: %d %s", kid, resp.StatusCode, body)
	}
	if resp, body := do(t, http.MethodGet, l.base+"/.well-known/openid-configuration", "", nil); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), cfg.Node.Issuer+"/oauth2/token") {
		t.Errorf("discovery: %d %s", resp.StatusCode, body)
	}

	// Revoke the access token: the next /auth refuses it.
	h := form()
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	req.SetBasicAuth(b.DemoClientID, b.DemoClientSecret)
	h.Set("Authorization", req.Header.Get("Authorization"))
	if resp, body := do(t, http.MethodPost, l.base+"/oauth2/revoke", "token="+url.QueryEscape(tok), h); resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %d %s", resp.StatusCode, body)
	}
	resp, _ = do(t, http.MethodGet, l.base+"/auth", "", bearer(tok))
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "revoked") {
		t.Fatalf("/auth after revocation: %d %v", resp.StatusCode, resp.Header)
	}

	// Admin API: a client created with the admin token gets tokens that
	// /auth accepts; without the token the API refuses.
	jh := http.Header{"Content-Type": {"application/json"}}
	if resp, _ := do(t, http.MethodPost, l.admin+"/v1/admin/clients", `{"name":"x","scopes":["demo"]}`, jh); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("admin API without the token: %d", resp.StatusCode)
	}
	if resp, _ := do(t, http.MethodPost, l.base+"/v1/admin/clients", `{"name":"x","scopes":["demo"]}`, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("admin API on the traffic listener: %d", resp.StatusCode)
	}
	jh.Set("Authorization", "Bearer "+b.AdminToken)
	resp, body = do(t, http.MethodPost, l.admin+"/v1/admin/clients", `{"name":"x","scopes":["demo"]}`, jh)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("admin create client: %d %s", resp.StatusCode, body)
	}
	var created struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	if err := json.Unmarshal(body, &created); err != nil || created.ID == "" || created.Secret == "" {
		t.Fatalf("admin create client answered %s: %v", body, err)
	}
	tok2 := clientToken(t, l.base, created.ID, created.Secret)

	// Revoke by jti through the admin API: the next /auth refuses it.
	tok3 := clientToken(t, l.base, b.DemoClientID, b.DemoClientSecret)
	if resp, _ := do(t, http.MethodGet, l.base+"/auth", "", bearer(tok3)); resp.StatusCode != http.StatusOK {
		t.Fatalf("/auth with a fresh token: %d", resp.StatusCode)
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.Split(tok3, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		JTI    string `json:"jti"`
		Tenant string `json:"tenant"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.JTI == "" {
		t.Fatalf("token claims %s: %v", payload, err)
	}
	// The demo client, like every client from before tenants, is the
	// default tenant's, and its tokens say so.
	if claims.Tenant != store.DefaultTenant {
		t.Errorf("the demo client's token: tenant %q, want %q", claims.Tenant, store.DefaultTenant)
	}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/admin/revocations", `{"jti":"`+claims.JTI+`"}`, jh); resp.StatusCode/100 != 2 {
		t.Fatalf("admin revoke: %d %s", resp.StatusCode, body)
	}
	resp, _ = do(t, http.MethodGet, l.base+"/auth", "", bearer(tok3))
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "revoked") {
		t.Fatalf("/auth after admin revocation: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := do(t, http.MethodGet, l.base+"/auth", "", bearer(tok2)); resp.StatusCode != http.StatusOK {
		t.Errorf("/auth with the new client's token: %d", resp.StatusCode)
	}
	if err := l.stop(); err != nil {
		t.Fatal(err)
	}

	// Restart: same signing key, no new demo client or admin token, the
	// revocation still in force, the second client's token still valid.
	again := startLive(t, cfg)
	if got := again.Bootstrap(); got.DemoClientID != "" || got.DemoClientSecret != "" || got.AdminToken != "" {
		t.Errorf("restart created secrets again: %+v", got)
	}
	if again.Thumbprint() != kid {
		t.Errorf("restart changed the signing kid: %s != %s", again.Thumbprint(), kid)
	}
	if resp, _ := do(t, http.MethodGet, again.base+"/auth", "", bearer(tok)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("revoked token after restart: %d", resp.StatusCode)
	}
	if resp, _ := do(t, http.MethodGet, again.base+"/auth", "", bearer(tok2)); resp.StatusCode != http.StatusOK {
		t.Errorf("valid token after restart: %d", resp.StatusCode)
	}
	if _, err := clientToken2(again.base, b.DemoClientID, b.DemoClientSecret); err != nil {
		t.Errorf("demo client's secret after restart: %v", err)
	}
}

func clientToken2(base, id, secret string) (string, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/oauth2/token", strings.NewReader("grant_type=client_credentials"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status + " " + string(b))
	}
	return string(b), nil
}

func TestTokenServiceSQLite(t *testing.T) {
	logs := &syncBuffer{}
	cfg := server.Config{Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true}}
	tokenServiceFlow(t, cfg)
	for _, name := range []string{node.RootKeyFile, node.AdminTokenFile, node.StoreFile} {
		if info, err := os.Stat(filepath.Join(cfg.Node.DataDir, name)); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", name, info, err)
		}
	}
}

func TestTokenServicePostgres(t *testing.T) {
	dbURL := newSchema(t)
	dir := t.TempDir()
	rootKey := filepath.Join(dir, "root.key")
	if err := rootkey.GenerateKeyFile(rootKey, rand.Reader); err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Node: &node.Config{DataDir: filepath.Join(dir, "data"), Issuer: testIssuer, Audience: testAudience, Dev: true,
		TokenService: config.TokenService{DatabaseURL: dbURL, RootKeyFile: rootKey}}}
	tokenServiceFlow(t, cfg)
	if _, err := os.Stat(filepath.Join(cfg.Node.DataDir, node.StoreFile)); err == nil {
		t.Error("a SQLite store was created with a database URL")
	}
}

func TestTokenServiceRootKeyFromEnv(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "k")
	if err := rootkey.GenerateKeyFile(path, rand.Reader); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Node: &node.Config{DataDir: filepath.Join(dir, "data"), Issuer: testIssuer, Audience: testAudience, LookupEnv: func(n string) (string, bool) {
		if n == node.RootKeyEnv {
			return strings.TrimSpace(string(key)), true
		}
		return "", false
	}}}
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if b := s.Node().Bootstrap(); b.Dev || b.DemoClientID != "" {
		t.Errorf("dev set-up with a root key and no --dev: %+v", b)
	}
	if _, err := os.Stat(filepath.Join(cfg.Node.DataDir, node.RootKeyFile)); err == nil {
		t.Error("a dev root key was generated although one was configured")
	}
}

// newSchema creates an empty schema on DATABASE_URL for t, dropped when t
// ends, and returns a URL that uses it; without DATABASE_URL, or under
// -short, it skips.
func newSchema(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration: PostgreSQL; run without -short")
	}
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	return testnet.PostgresSchema(t, base, "kg_server")
}

// TestPurgeExpired: the schedule deletes refresh tokens past
// their expiry, and revocations of tokens that have expired, from the
// store, and only those.
func TestPurgeExpired(t *testing.T) {
	var now atomic.Pointer[time.Time]
	t0 := time.Now()
	now.Store(&t0)
	clock := func() time.Time { return *now.Load() }
	adminToken := strings.Repeat("p", 40)
	l := startLive(t, server.Config{AdminToken: adminToken, Now: clock,
		Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true}})
	b := l.Bootstrap()
	jh := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + adminToken}}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/admin/users", `{"username":"alice","password":"a long password","scopes":["demo"]}`, jh); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create user: %d %s", resp.StatusCode, body)
	}
	login := func() string {
		h := form()
		resp, body := do(t, http.MethodPost, l.base+"/v1/login", "username=alice&password=a+long+password&client_id="+b.DemoClientID+"&client_secret="+b.DemoClientSecret, h)
		var tr struct {
			Refresh string `json:"refresh_token"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tr) != nil || tr.Refresh == "" {
			t.Fatalf("login: %d %s", resp.StatusCode, body)
		}
		return tr.Refresh
	}
	old := login()
	access := clientToken(t, l.base, b.DemoClientID, b.DemoClientSecret)
	h := form()
	if resp, body := do(t, http.MethodPost, l.base+"/oauth2/revoke", "token="+access+"&client_id="+b.DemoClientID+"&client_secret="+b.DemoClientSecret, h); resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %d %s", resp.StatusCode, body)
	}
	revocations := func() int {
		rs, err := l.Store().Revocations(context.Background(), t0.Add(-time.Hour)) // as of before the revocation lapsed
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	// A subject revocation from long before the purge (past its
	// retention then), and one that will still be needed.
	for _, rv := range []string{`{"subject":"old-user","before":"` + t0.Add(-time.Hour).UTC().Format(time.RFC3339) + `"}`, `{"subject":"kept-user"}`} {
		if resp, body := do(t, http.MethodPost, l.admin+"/v1/admin/revocations", rv, jh); resp.StatusCode != http.StatusCreated {
			t.Fatalf("revoke subject: %d %s", resp.StatusCode, body)
		}
	}
	if revocations() != 3 {
		t.Fatal("the revocations are not stored")
	}
	later := t0.Add(issuer.DefaultRefreshTTL + time.Second)
	now.Store(&later)
	fresh := login()
	stored := func(tok string) bool {
		d := issuer.SecretDigest(tok)
		_, err := l.Store().GetRefreshToken(context.Background(), d[:])
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	if !stored(old) || !stored(fresh) {
		t.Fatal("refresh tokens not stored")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); runEvery(ctx, l.Node, 10*time.Millisecond) }()
	deadline := time.Now().Add(5 * time.Second)
	for stored(old) {
		if time.Now().After(deadline) {
			t.Fatal("the expired refresh token was not deleted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for revocations() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the lapsed revocations were not deleted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rs, _ := l.Store().Revocations(context.Background(), t0); len(rs) != 1 || rs[0].Subject != "kept-user" {
		t.Errorf("left in the store: %+v, want the kept-user revocation", rs)
	}
	issued := t0.Add(-2 * time.Hour)
	if l.Revocations().Revoked(testIssuer, "", "old-user", issued) || !l.Revocations().Revoked(testIssuer, "", "kept-user", issued) {
		t.Error("the node's memory did not drop just the subject revocation past its retention")
	}
	cancel()
	<-done
	if !stored(fresh) {
		t.Error("a refresh token that has not expired was deleted")
	}
}

// TestRevocationOutlivesLeeway: a revoked token stays refused while /auth
// would still accept it past its exp (the leeway), on a node without Redis
// whose schedule sweeps the revocation set, and after a restart that loads
// the revocations from the store.
func TestRevocationOutlivesLeeway(t *testing.T) {
	var now atomic.Pointer[time.Time]
	t0 := time.Now()
	now.Store(&t0)
	clock := func() time.Time { return *now.Load() }
	dir := filepath.Join(t.TempDir(), "data")
	cfg := server.Config{Now: clock, Node: &node.Config{DataDir: dir, Issuer: testIssuer, Audience: testAudience, Dev: true}}
	l := startLive(t, cfg)
	b := l.Bootstrap()
	access := clientToken(t, l.base, b.DemoClientID, b.DemoClientSecret)
	if resp, body := do(t, http.MethodPost, l.base+"/oauth2/revoke", "token="+access+"&client_id="+b.DemoClientID+"&client_secret="+b.DemoClientSecret, form()); resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %d %s", resp.StatusCode, body)
	}
	// Past exp, within the leeway.
	late := t0.Add(15*time.Minute + server.Leeway/2)
	now.Store(&late)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); runEvery(ctx, l.Node, 5*time.Millisecond) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	<-done
	if resp, _ := do(t, http.MethodGet, l.base+"/auth", "", bearer(access)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a revoked token within the leeway after the sweep: %d, want 401", resp.StatusCode)
	}
	if err := l.stop(); err != nil {
		t.Fatal(err)
	}
	again := startLive(t, server.Config{Now: clock, Node: &node.Config{DataDir: dir, Issuer: testIssuer, Audience: testAudience, Dev: true}})
	if resp, _ := do(t, http.MethodGet, again.base+"/auth", "", bearer(access)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a revoked token within the leeway after a restart: %d, want 401", resp.StatusCode)
	}
}
