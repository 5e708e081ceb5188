package cli

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/testnet"
)

// exampleDir holds the commented configurations the README points to.
const exampleDir = "../../examples"

// example writes examples/name with each old string replaced (paths under
// /etc/keygate, an identity provider's URL) into the harness's directory and
// returns its path. A replacement that matches nothing fails the test: the
// example changed and the test no longer tries what it says.
func (h *harness) example(name string, replace ...string) string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(exampleDir, name))
	if err != nil {
		h.t.Fatal(err)
	}
	s := string(b)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			h.t.Fatalf("examples/%s no longer holds %q", name, replace[i])
		}
		s = strings.ReplaceAll(s, replace[i], replace[i+1])
	}
	return h.write(name, []byte(s))
}

// authorize asks forward-auth about method and uri, sent in the headers the
// proxy preset trusts (as the README's snippets set them), and returns the
// status.
func authorize(t *testing.T, addr, token, proxy, method, uri string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/auth", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("X-Forwarded-Host", "api.example.com")
	switch proxy {
	case "nginx":
		req.Header.Set("X-Original-Method", method)
		req.Header.Set("X-Original-URI", uri)
	case "caddy", "auto":
		req.Header.Set("X-Forwarded-Method", method)
		req.Header.Set("X-Forwarded-Uri", uri)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Logf("%s %s as %s: %d %s %s", method, uri, proxy, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}
	return resp.StatusCode
}

// TestExamplesCoverEveryFile: every file in examples/ is tried below.
func TestExamplesCoverEveryFile(t *testing.T) {
	tried := []string{"dev.yaml", "gateway-nginx.yaml", "gateway-caddy.yaml", "fleet.yaml", "sealed.yaml"}
	names, err := filepath.Glob(filepath.Join(exampleDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		found := false
		for _, want := range tried {
			found = found || filepath.Base(n) == want
		}
		if !found {
			t.Errorf("examples/%s is not started by any test", filepath.Base(n))
		}
	}
}

// The development example starts in dev mode and trusts its own sample token.
func TestExampleDev(t *testing.T) {
	h := newHarness(t)
	cfg := h.example("dev.yaml", "./keygate-data", h.path("data"))
	s := h.serve("--config", cfg, "--listen", "127.0.0.1:0", "--dev")
	defer s.stop()
	m := tokenLine.FindStringSubmatch(s.stdout.String())
	if m == nil {
		t.Fatalf("no sample token printed:\n%s", s.stdout)
	}
	if code := authorize(t, s.addr, m[1], "auto", http.MethodGet, "/orders"); code != http.StatusOK {
		t.Errorf("/auth with the sample token: %d", code)
	}
	if code := authorize(t, s.addr, "", "auto", http.MethodGet, "/public/x"); code != http.StatusOK {
		t.Errorf("/auth on the anonymous rule: %d", code)
	}
	if _, err := os.Stat(filepath.Join(h.path("data"), "audit")); err != nil {
		t.Errorf("no audit directory: %v", err)
	}
	// The example names its proxy (auto): serve has nothing to warn of.
	if logs := s.stderr.String(); strings.Contains(logs, "forward_auth.proxy is not set") {
		t.Errorf("serve warns that proxy is not set on a file that sets it:\n%s", logs)
	}
}

// TestProxyNotSetWarning: serve warns that forward_auth.proxy is not set
// when rules are configured and no proxy is named, and only then.
func TestProxyNotSetWarning(t *testing.T) {
	h := newHarness(t)
	for name, c := range map[string]struct {
		yaml string
		warn bool
	}{
		"rules, no proxy":   {"forward_auth:\n  rules: [{path_prefix: /, anonymous: true}]\n", true},
		"rules, proxy auto": {"forward_auth:\n  proxy: auto\n  rules: [{path_prefix: /, anonymous: true}]\n", false},
		"rules, nginx":      {"forward_auth:\n  proxy: nginx\n  rules: [{path_prefix: /, anonymous: true}]\n", false},
	} {
		cfg := h.write(strings.ReplaceAll(name, " ", "")+".yaml", []byte(c.yaml))
		s := h.serve("--config", cfg, "--listen", "127.0.0.1:0", "--data-dir", h.path(strings.ReplaceAll(name, " ", "")), "--dev")
		s.stop()
		if got := strings.Contains(s.stderr.String(), "forward_auth.proxy is not set"); got != c.warn {
			t.Errorf("%s: warned %v, want %v:\n%s", name, got, c.warn, s.stderr)
		}
	}
}

// The gateway examples run as gateways only, behind the proxy they name,
// with the rules they describe.
func TestExampleGateways(t *testing.T) {
	h := newHarness(t)
	keyPath, idp := h.idp(t)
	metricsToken := h.write("metrics.token", []byte(strings.Repeat("m", 40)+"\n"))
	for _, c := range []struct {
		file, proxy, iss, aud string
		replace               []string
		allowed, refused      [][2]string // scope, method+" "+uri
	}{
		{file: "gateway-nginx.yaml", proxy: "nginx", iss: "https://idp.example.com/", aud: "orders-api",
			replace: []string{"https://idp.example.com/.well-known/jwks.json", idp.URL, "/etc/keygate/metrics.token", metricsToken},
			allowed: [][2]string{{"orders.read", "GET /orders/1"}, {"orders.write", "POST /orders"}, {"", "GET /healthz"}, {"orders.admin", "GET /admin/users"}},
			refused: [][2]string{{"orders.read", "POST /orders"}, {"orders.read", "GET /admin/users"}, {"", "GET /orders/1"}}},
		{file: "gateway-caddy.yaml", proxy: "caddy", iss: "https://tokens.internal.example/", aud: "billing",
			replace: []string{"/etc/keygate/keys/signer-2026.pem", keyPath},
			allowed: [][2]string{{"billing.use", "GET /invoices"}, {"", "GET /public/logo.png"}},
			refused: [][2]string{{"other", "GET /invoices"}, {"", "GET /invoices"}}},
	} {
		t.Run(c.file, func(t *testing.T) {
			data := h.path("data-" + c.file)
			s := h.serve("--config", h.example(c.file, c.replace...), "--listen", "127.0.0.1:0", "--data-dir", data)
			defer s.stop()
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("a gateway-only example created its data directory (%v)", err)
			}
			sign := func(scope string) string {
				if scope == "" {
					return ""
				}
				return strings.TrimSpace(h.must("token", "sign", "--key", keyPath, "--iss", c.iss, "--aud", c.aud, "--sub", "u1", "--scope", scope))
			}
			for _, a := range c.allowed {
				method, uri, _ := strings.Cut(a[1], " ")
				if code := authorize(t, s.addr, sign(a[0]), c.proxy, method, uri); code != http.StatusOK {
					t.Errorf("scope %q, %s: %d, want 200", a[0], a[1], code)
				}
			}
			for _, r := range c.refused {
				method, uri, _ := strings.Cut(r[1], " ")
				if code := authorize(t, s.addr, sign(r[0]), c.proxy, method, uri); code != http.StatusUnauthorized && code != http.StatusForbidden {
					t.Errorf("scope %q, %s: %d, want 401 or 403", r[0], r[1], code)
				}
			}
		})
	}
}

// The fleet example on this machine's PostgreSQL and Redis: initialized
// with operator init as it says, it issues and verifies tokens.
func TestExampleFleet(t *testing.T) {
	dbURL := os.Getenv("DATABASE_URL")
	if dbURL == "" {
		t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	redisURL, prefix := testnet.RedisPrefix(t)
	h := newHarness(t)
	dbURL = cliSchema(t, dbURL)
	secrets := h.path("secrets")
	if err := os.Mkdir(secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	h.write("secrets/database.url", []byte(dbURL+"\n"))
	h.write("secrets/redis.url", []byte(redisURL+"\n"))
	h.must("operator", "init", "--database-url", dbURL, "--out", secrets)
	cfg := h.example("fleet.yaml", "/etc/keygate/", secrets+"/", "/var/log/keygate/audit", h.path("audit"),
		"redis_prefix: keygate", "redis_prefix: "+prefix, "probe_listen: 0.0.0.0:9091", "probe_listen: 127.0.0.1:0")
	s := h.serve("--config", cfg, "--listen", "127.0.0.1:0", "--data-dir", h.path("data"))
	defer s.stop()
	admin := []string{"--admin", s.adminURL(t), "--admin-token-file", filepath.Join(secrets, "admin.token")}
	out := h.must(append([]string{"clients", "create", "--name", "svc", "--scopes", "orders.read"}, admin...)...)
	id, secret := clientIDLine.FindStringSubmatch(out)[1], clientSecretLine.FindStringSubmatch(out)[1]
	tok := strings.TrimSpace(h.must("token", "--client", id, "--secret", secret, "--url", "http://"+s.addr))
	if code := authorize(t, s.addr, tok, "nginx", http.MethodGet, "/orders"); code != http.StatusOK {
		t.Errorf("/auth with a token of the fleet: %d", code)
	}
	if files, _ := filepath.Glob(filepath.Join(h.path("audit"), "audit-*.jsonl")); len(files) == 0 {
		t.Error("no audit file where the example puts them")
	}
}

// The sealed example walks its own cycle: keyring init, a sealed start,
// unseal with the passphrase, seal with the admin token.
func TestExampleSealed(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: the sealed example's whole cycle (Argon2id); run without -short")
	}
	const pass = "a long unseal passphrase"
	h := newHarness(t)
	data := h.path("data")
	h.stdin = pass + "\n"
	h.must("keyring", "init", "--data-dir", data)
	adminToken := h.write("admin.token", []byte(strings.Repeat("s", 40)+"\n"))
	cfg := h.example("sealed.yaml", "/var/lib/keygate", data, "/etc/keygate/admin.token", adminToken)
	s := h.serve("--config", cfg, "--listen", "127.0.0.1:0")
	defer s.stop()
	if !strings.Contains(s.stdout.String(), "keygate is sealed") {
		t.Fatalf("the sealed example did not start sealed:\n%s", s.stdout)
	}
	adminURL := s.adminURL(t)
	h.stdin = pass + "\n"
	if out := h.must("unseal", "--admin", adminURL); !strings.Contains(out, `"sealed": false`) {
		t.Errorf("unseal printed %q", out)
	}
	if out := h.must("seal", "--admin", adminURL, "--admin-token-file", adminToken); !strings.Contains(out, `"sealed": true`) {
		t.Errorf("seal printed %q", out)
	}
	// The passphrase seals too, for an operator without the admin token.
	h.stdin = pass + "\n"
	h.must("unseal", "--admin", adminURL)
	h.stdin = "not the passphrase\n"
	if r := h.run("seal", "--admin", adminURL, "--passphrase"); r.code != ExitFail || !strings.Contains(r.stderr, "wrong unseal passphrase") {
		t.Errorf("seal with a wrong passphrase: %d %s", r.code, r.stderr)
	}
	h.stdin = pass + "\n"
	if out := h.must("seal", "--admin", adminURL, "--passphrase"); !strings.Contains(out, `"sealed": true`) {
		t.Errorf("seal --passphrase printed %q", out)
	}
}
