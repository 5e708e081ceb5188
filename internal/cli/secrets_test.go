package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store/postgres"
	"github.com/keygate/keygate/internal/testnet"
)

// TestNoSecretsOnAdminSurface runs the real binary as a fleet node with
// every kind of secret in its environment — a database password in
// KEYGATE_DATABASE_URL, a Redis password in KEYGATE_REDIS_URL, the root key in
// KEYGATE_ROOT_KEY, the admin token in KEYGATE_ADMIN_TOKEN, a metrics token
// in a file — and pprof enabled, then reads every admin endpoint (each
// pprof profile included, the binary ones decompressed), the discovery
// documents and its whole log, and finds none of them. A client secret
// issued through the admin API is looked for too, and in the audit log —
// its files and its copy in the store (audit.store) — none of those,
// nor a user's password or the tokens the requests carried.
func TestNoSecretsOnAdminSurface(t *testing.T) {
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("needs redis-server to run a Redis with a password")
	}
	if testing.Short() {
		t.Skip("builds and runs the keygate binary")
	}
	bin := buildKeygate(t)
	secret := func(prefix string) string {
		b := make([]byte, 24)
		rand.Read(b)
		return prefix + base64.RawURLEncoding.EncodeToString(b)
	}
	dbPass, redisPass, adminToken, metricsToken := secret("dbpw"), secret("redispw"), secret("admin"), secret("metrics")
	rootRaw := make([]byte, 32)
	rand.Read(rootRaw)
	rootKey := base64.StdEncoding.EncodeToString(rootRaw)

	redisAddr := testnet.ClosedAddr(t)
	_, redisPort, _ := strings.Cut(redisAddr, ":")
	rs := exec.Command(redisBin, "--bind", "127.0.0.1", "--port", redisPort, "--requirepass", redisPass,
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Process.Kill(); rs.Wait() })

	dbURL, err := url.Parse(cliSchema(t, base))
	if err != nil {
		t.Fatal(err)
	}
	dbURL.User = url.UserPassword(dbURL.User.Username(), dbPass) // trust auth: never asked for, still a secret
	dir := t.TempDir()
	metricsFile := filepath.Join(dir, "metrics.token")
	if err := os.WriteFile(metricsFile, []byte(metricsToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, adminAddr := testnet.ClosedAddr(t), testnet.ClosedAddr(t)
	args := []string{"serve", "--listen", addr, "--admin-listen", adminAddr, "--data-dir", filepath.Join(dir, "data"),
		"--issuer", "https://kg.test"}
	env := []string{"KEYGATE_REDIS_URL=redis://:" + redisPass + "@" + redisAddr + "/0", "KEYGATE_ROOT_KEY=" + rootKey,
		"KEYGATE_ADMIN_TOKEN=" + adminToken, "KEYGATE_DATABASE_URL=" + dbURL.String(), "KEYGATE_PPROF=true",
		"KEYGATE_METRICS_TOKEN_FILE=" + metricsFile, "KEYGATE_AUDIT_STORE=true"}
	waitRedis(t, redisAddr)
	c := startChildEnv(t, bin, args, env, addr)

	client := &http.Client{Timeout: 30 * time.Second}
	get := func(u, token string) []byte {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 && !strings.Contains(u, "/cmdline") {
			t.Errorf("GET %s: %d %s", u, resp.StatusCode, b)
		}
		if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil { // pprof's protobuf profiles
			if raw, err := io.ReadAll(zr); err == nil {
				b = append(b, raw...)
			}
		}
		return b
	}
	code, created, err := adminJSON(client, http.MethodPost, "http://"+adminAddr+"/v1/admin/clients", adminToken,
		map[string]any{"name": "svc", "scopes": []string{"read"}})
	if err != nil || code != 201 {
		t.Fatalf("create client: %d %v %v", code, created, err)
	}
	clientSecret, _ := created["client_secret"].(string)
	clientID, _ := created["client_id"].(string)
	tokenURL := "http://" + addr
	password := secret("password")
	code, user, err := adminJSON(client, http.MethodPost, "http://"+adminAddr+"/v1/admin/users", adminToken,
		map[string]any{"username": "alice", "password": password, "scopes": []string{"read"}})
	if err != nil || code != 201 {
		t.Fatalf("create user: %d %v %v", code, user, err)
	}
	code, tok, err := form(client, tokenURL+"/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, clientID, clientSecret)
	if err != nil || code != 200 {
		t.Fatalf("token: %d %v %v", code, tok, err)
	}
	access, _ := tok["access_token"].(string)
	code, login, err := form(client, tokenURL+"/v1/login", url.Values{"username": {"alice"}, "password": {password}}, clientID, clientSecret)
	if err != nil || code != 200 {
		t.Fatalf("login: %d %v %v", code, login, err)
	}
	loginAccess, _ := login["access_token"].(string)
	refresh, _ := login["refresh_token"].(string)
	if code, _, err := form(client, tokenURL+"/oauth2/revoke", url.Values{"token": {access}}, clientID, clientSecret); err != nil || code != 200 {
		t.Fatalf("revoke: %d %v", code, err)
	}
	if code, _, err := form(client, tokenURL+"/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}, clientID, clientSecret); err != nil || code != 200 {
		t.Fatalf("refresh: %d %v", code, err)
	}
	form(client, tokenURL+"/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, clientID, "kgs_not"+clientSecret[7:]) //nolint:errcheck // refused
	code, auditStatus, err := adminJSON(client, http.MethodGet, "http://"+adminAddr+"/v1/admin/audit", adminToken, nil)
	if err != nil || code != 200 {
		t.Fatalf("GET /v1/admin/audit: %d %v %v", code, auditStatus, err)
	}
	auditNode, _ := auditStatus["node"].(string)

	var seen bytes.Buffer
	admin := "http://" + adminAddr
	for _, p := range []string{"/healthz", "/readyz", "/v1/sys/seal-status", "/v1/admin/clients", "/v1/admin/users",
		"/v1/admin/keys", "/v1/admin/audit", "/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol"} {
		seen.Write(get(admin+p, adminToken))
	}
	seen.Write(get(admin+"/metrics", metricsToken))
	index := string(get(admin+"/debug/pprof/", adminToken))
	for _, m := range regexp.MustCompile(`href='([a-z]+)\?debug=1'`).FindAllStringSubmatch(index, -1) {
		if m[1] == "profile" || m[1] == "trace" {
			continue // timed: read below for one second each
		}
		seen.Write(get(admin+"/debug/pprof/"+m[1]+"?debug=1", adminToken))
		seen.Write(get(admin+"/debug/pprof/"+m[1], adminToken))
	}
	seen.Write(get(admin+"/debug/pprof/goroutine?debug=2", adminToken))
	seen.Write(get(admin+"/debug/pprof/profile?seconds=1", adminToken))
	seen.Write(get(admin+"/debug/pprof/trace?seconds=1", adminToken))
	for _, p := range []string{"/.well-known/jwks.json", "/.well-known/openid-configuration"} {
		seen.Write(get("http://"+addr+p, ""))
	}
	c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		t.Error("keygate did not stop on SIGINT")
	}
	logs := c.stdout.String() + c.stderr.String()
	seen.WriteString(logs)
	if len(index) == 0 || !strings.Contains(index, "goroutine") {
		t.Errorf("the pprof index lists no profiles: %q", index)
	}
	for name, s := range map[string]string{"database password": dbPass, "Redis password": redisPass, "admin token": adminToken,
		"metrics token": metricsToken, "root key": rootKey, "root key (base64url)": base64.RawURLEncoding.EncodeToString(rootRaw),
		"client secret": clientSecret} {
		if s == "" {
			t.Errorf("%s: empty", name)
			continue
		}
		if i := bytes.Index(seen.Bytes(), []byte(s)); i >= 0 {
			lo := max(0, i-120)
			t.Errorf("the %s appears on the admin surface or in the log: …%q…", name, seen.Bytes()[lo:i])
		}
	}

	// The audit log: every file, and the store's copy.
	var audited bytes.Buffer
	files, _ := filepath.Glob(filepath.Join(dir, "data", "audit", "audit-*.jsonl"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		audited.Write(b)
	}
	fileBytes := audited.Len()
	st, err := postgres.Open(t.Context(), dbURL.String())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	entries, err := st.AuditEntries(t.Context(), auditNode, 1, 10000)
	if err != nil || len(entries) == 0 {
		t.Fatalf("the store's audit entries of %q: %d, %v", auditNode, len(entries), err)
	}
	for _, e := range entries {
		audited.Write(e.Line)
		audited.WriteByte('\n')
	}
	if fileBytes == 0 || !bytes.Contains(audited.Bytes(), []byte(`"op":"login.password"`)) {
		t.Fatalf("no audit records read (%d bytes of files)", fileBytes)
	}
	for name, s := range map[string]string{"database password": dbPass, "Redis password": redisPass, "admin token": adminToken,
		"metrics token": metricsToken, "root key": rootKey, "root key (base64url)": base64.RawURLEncoding.EncodeToString(rootRaw),
		"client secret": clientSecret, "password": password, "access token": access, "access token's signature": access[strings.LastIndexByte(access, '.')+1:],
		"login's access token": loginAccess, "refresh token": refresh, "username": `"alice"`} {
		if s != "" && bytes.Contains(audited.Bytes(), []byte(s)) {
			t.Errorf("the %s is in the audit log", name)
		}
	}
	if seen.Len() < 10000 {
		t.Errorf("only %d bytes read: the endpoints did not answer", seen.Len())
	}
}

// waitRedis waits for a Redis to accept connections.
func waitRedis(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal(fmt.Sprint("redis-server did not listen on ", addr))
}
