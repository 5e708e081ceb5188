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

	"github.com/keygate/keygate/internal/testnet"
)

// TestNoSecretsOnAdminSurface runs the real binary as a fleet node with
// every kind of secret in its flags and environment — a database password
// in --database-url, a Redis password in KEYGATE_REDIS_URL, the root key in
// KEYGATE_ROOT_KEY, the admin token in KEYGATE_ADMIN_TOKEN, a metrics token
// in a file — and pprof enabled, then reads every admin endpoint (each
// pprof profile included, the binary ones decompressed), the discovery
// documents and its whole log, and finds none of them. A client secret
// issued through the admin API is looked for too.
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
		"--issuer", "https://kg.test", "--database-url", dbURL.String(), "--pprof", "--metrics-token-file", metricsFile}
	env := []string{"KEYGATE_REDIS_URL=redis://:" + redisPass + "@" + redisAddr + "/0", "KEYGATE_ROOT_KEY=" + rootKey,
		"KEYGATE_ADMIN_TOKEN=" + adminToken}
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

	var seen bytes.Buffer
	admin := "http://" + adminAddr
	for _, p := range []string{"/healthz", "/readyz", "/v1/sys/seal-status", "/v1/admin/clients", "/v1/admin/users",
		"/v1/admin/keys", "/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol"} {
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
	if !strings.Contains(logs, "--database-url holds a password") {
		t.Errorf("no warning for the password in --database-url:\n%s", logs)
	}
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
