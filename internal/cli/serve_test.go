package cli

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/testnet"
)

// serving is a "keygate serve" run in the background.
type serving struct {
	addr           string
	stdout, stderr *syncBuffer
	stop           func() int // cancels the context and returns the exit code; idempotent
}

func (h *harness) serve(args ...string) *serving {
	h.t.Helper()
	s := &serving{stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	a := h.app(s.stdout, s.stderr)
	ready := make(chan string, 1)
	a.ready = func(addr string) { ready <- addr }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- a.main(ctx, append([]string{"serve", "--admin-listen", "127.0.0.1:0"}, args...)) }()
	select {
	case s.addr = <-ready:
	case code := <-done:
		cancel()
		h.t.Fatalf("serve exited %d before listening:\n%s", code, s.stderr)
	case <-time.After(10 * time.Second):
		cancel()
		h.t.Fatal("serve did not start listening")
	}
	// stop may be called twice (by a test and by serveDev's cleanup): the
	// exit code is received once, and a second call returns it at once
	// rather than waiting on done for 15 s.
	var once sync.Once
	code := -1
	s.stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case code = <-done:
			case <-time.After(15 * time.Second):
				h.t.Fatal("serve did not stop after cancel")
			}
		})
		return code
	}
	return s
}

// adminURL waits for serve to log its admin listener's address and
// returns its URL.
func (s *serving) adminURL(t *testing.T) string {
	t.Helper()
	var m []string
	for deadline := time.Now().Add(3 * time.Second); m == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		m = adminAddrLog.FindStringSubmatch(s.stderr.String()) // logged just after the ready hook
	}
	if m == nil {
		t.Fatalf("admin address not logged:\n%s", s.stderr)
	}
	return "http://" + m[1]
}

// serveDev runs `serve --dev` on a fresh data directory, stopped when the
// test ends, and returns it with the flags that reach its admin API.
func (h *harness) serveDev(t *testing.T) (s *serving, admin []string) {
	t.Helper()
	data := h.path("data")
	s = h.serve("--listen", "127.0.0.1:0", "--dev", "--data-dir", data)
	t.Cleanup(func() { s.stop() })
	return s, []string{"--admin", s.adminURL(t), "--admin-token-file", filepath.Join(data, "admin.token")}
}

// TestServingStopTwice: the harness's stop may run twice — a test's own
// call and serveDev's cleanup — and the second returns the first's exit
// code at once.
func TestServingStopTwice(t *testing.T) {
	h := newHarness(t)
	s, _ := h.serveDev(t) // its cleanup calls stop a third time
	if code := s.stop(); code != ExitOK {
		t.Fatalf("first stop: exit %d:\n%s", code, s.stderr)
	}
	start := time.Now()
	if code := s.stop(); code != ExitOK {
		t.Errorf("second stop: exit %d, want the first's %d", code, ExitOK)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("second stop took %v, want at once", d)
	}
}

var tokenLine = regexp.MustCompile(`(?m)^(eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)$`)

func TestServe(t *testing.T) {
	h := newHarness(t)
	data := h.path("data")
	s := h.serve("--listen", "127.0.0.1:0", "--data-dir", data)
	out := s.stdout.String()
	m := tokenLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no sample token on stdout:\n%s", out)
	}
	token := m[1]
	wantCurl := "curl -i -H 'Authorization: Bearer " + token + "' http://" + s.addr + "/auth"
	if !strings.Contains(out, wantCurl) {
		t.Errorf("stdout lacks %q:\n%s", wantCurl, out)
	}
	resp := get(t, "http://"+s.addr+"/auth", token)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Auth-Subject") != "demo" || resp.Header.Get("X-Auth-Scopes") != "demo" {
		t.Errorf("sample token: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := get(t, "http://"+s.addr+"/auth", tamper(token)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("tampered token: %d", resp.StatusCode)
	}
	jwk := h.write("server.jwk", serverKey(t, "http://"+s.addr))
	if code := s.stop(); code != ExitOK {
		t.Fatalf("serve exit %d:\n%s", code, s.stderr)
	}
	logs := s.stderr.String()
	for _, want := range []string{"addr=" + s.addr, "issuer=http://" + s.addr, "signing key created", "generated a dev root key", "msg=stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	checkNoSecrets(t, logs, data, token, tamper(token))
	checkSample(t, h, data, jwk, token, s.addr)
}

// serverKey fetches the server's JWKS and returns its one key as a JWK.
func serverKey(t *testing.T, base string) []byte {
	t.Helper()
	resp, err := http.Get(base + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("JWKS: %v, %d keys", err, len(set.Keys))
	}
	return set.Keys[0]
}

// checkSample verifies the sample token with the CLI against the server's
// published key, and checks a second run reuses that key and creates no
// secrets again.
func checkSample(t *testing.T, h *harness, data, jwk, token, addr string) {
	t.Helper()
	claims := decodeClaims(t, h.must("token", "verify", "--key", jwk, "--alg", "ES256",
		"--iss", "http://"+addr, "--aud", "keygate-demo", token))
	checkMinted(t, claims, h.now, time.Hour)
	again := h.serve("--listen", "127.0.0.1:0", "--data-dir", data, "--issuer", "https://fixed.test", "--audience", "other", "--dev")
	if code := again.stop(); code != ExitOK {
		t.Fatalf("second serve exit %d", code)
	}
	kid := h.must("keys", "thumbprint", jwk)
	logs := again.stderr.String()
	if !strings.Contains(logs, "signing keys loaded") || !strings.Contains(logs, "thumbprint="+strings.TrimSpace(kid)) {
		t.Errorf("second run did not reuse the key:\n%s", logs)
	}
	if !strings.Contains(logs, "issuer=https://fixed.test") || !strings.Contains(again.stdout.String(), `aud "other"`) {
		t.Errorf("--issuer/--audience not used:\n%s\n%s", logs, again.stdout)
	}
	if out := again.stdout.String(); strings.Contains(out, "client_secret=") || strings.Contains(out, "Admin token") {
		t.Errorf("second run printed the demo client or admin token again:\n%s", out)
	}
}

// checkNoSecrets checks the logs hold none of the tokens and none of the
// secrets in the data directory.
func checkNoSecrets(t *testing.T, logs, data string, tokens ...string) {
	t.Helper()
	forbidden := []string{"-----BEGIN", "PRIVATE KEY"}
	for _, name := range []string{"root.key", "admin.token"} {
		b, err := os.ReadFile(filepath.Join(data, name))
		if err != nil {
			t.Fatal(err)
		}
		forbidden = append(forbidden, strings.TrimSpace(string(b)))
	}
	for _, tok := range tokens {
		forbidden = append(forbidden, tok, tok[strings.LastIndexByte(tok, '.')+1:])
	}
	for _, s := range forbidden {
		if strings.Contains(logs, s) {
			t.Errorf("logs contain %.40q…", s)
		}
	}
}

func get(t *testing.T, url, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestServeRefuses(t *testing.T) {
	h := newHarness(t)
	file := h.write("file", []byte("x"))
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"bad listen address", []string{"--listen", "256.0.0.1:0"}, ExitFail, "listen"},
		{"data dir is a file", []string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data-dir", file}, ExitFail, "data directory"},
		{"bad log level", []string{"--log-level", "loud"}, ExitUsage, "log-level"},
		{"argument", []string{"extra"}, ExitUsage, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, h.run(append([]string{"serve"}, tt.args...)...), tt.code, "", tt.stderr)
		})
	}
}

func TestBaseURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		"0.0.0.0:80":     "http://127.0.0.1:80",
		"[::]:8080":      "http://[::1]:8080",
		"[::1]:9":        "http://[::1]:9",
	} {
		if got := baseURL("http", fakeAddr(addr)); got != want {
			t.Errorf("baseURL(%s) = %s, want %s", addr, got, want)
		}
	}
	if got := baseURL("https", fakeAddr("0.0.0.0:8443")); got != "https://127.0.0.1:8443" {
		t.Errorf("baseURL(https, 0.0.0.0:8443) = %s", got)
	}
	for hostport, want := range map[string]string{":7000": "127.0.0.1:7000", "0.0.0.0:7000": "127.0.0.1:7000", "[::]:7000": "[::1]:7000",
		"kg.internal:7000": "kg.internal:7000", "nonsense": "nonsense"} {
		if got := localHostPort(hostport); got != want {
			t.Errorf("localHostPort(%s) = %s, want %s", hostport, got, want)
		}
	}
}

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

// idp makes an ES256 key with the CLI and serves its JWKS until t ends;
// it returns the key's file and the server.
func (h *harness) idp(t *testing.T) (keyPath string, srv *httptest.Server) {
	t.Helper()
	keyPath = h.path("idp.pem")
	h.must("keys", "generate", "--alg", "ES256", "--out", keyPath)
	jwks := h.must("keys", "jwks", keyPath)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, jwks) }))
	t.Cleanup(srv.Close)
	return keyPath, srv
}

// TestServeQuickStart runs the one-issuer quick start against a real JWKS
// endpoint and upstream: forward-auth and the reverse proxy both check
// tokens of that issuer, and the dev key is not trusted.
func TestServeQuickStart(t *testing.T) {
	h := newHarness(t)
	keyPath, idp := h.idp(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "upstream saw "+r.Header.Get("X-Auth-Subject"))
	}))
	defer up.Close()

	s := h.serve("--listen", "127.0.0.1:0", "--data-dir", h.path("data"), "--issuer", "https://idp.test/",
		"--jwks-url", idp.URL, "--audience", "api", "--alg", "ES256", "--upstream", up.URL)
	defer s.stop()
	if tokenLine.MatchString(s.stdout.String()) {
		t.Errorf("a dev sample token was printed with an issuer configured:\n%s", s.stdout)
	}
	tok := strings.TrimSpace(h.must("token", "sign", "--key", keyPath, "--iss", "https://idp.test/", "--sub", "bob", "--aud", "api"))
	if resp := get(t, "http://"+s.addr+"/auth", tok); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Auth-Subject") != "bob" {
		t.Errorf("forward-auth: %d %v", resp.StatusCode, resp.Header)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.addr+"/orders", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "upstream saw bob" {
		t.Errorf("proxy: %d %q", resp.StatusCode, body)
	}
	wrongAud := strings.TrimSpace(h.must("token", "sign", "--key", keyPath, "--iss", "https://idp.test/", "--sub", "bob", "--aud", "other"))
	if resp := get(t, "http://"+s.addr+"/orders", wrongAud); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong audience through the proxy: %d", resp.StatusCode)
	}
	if resp := get(t, "http://"+s.addr+"/orders", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token through the proxy: %d", resp.StatusCode)
	}
}

func TestServeFlagErrors(t *testing.T) {
	h := newHarness(t)
	for name, args := range map[string][]string{
		"jwks without issuer":   {"--jwks-url", "https://idp.example.com/jwks"},
		"upstream without jwks": {"--upstream", "http://127.0.0.1:1"},
		"config and jwks":       {"--config", "x.yaml", "--jwks-url", "https://idp.example.com/jwks"},
		"unknown proxy":         {"--proxy", "haproxy"},
	} {
		t.Run(name, func(t *testing.T) {
			if code := h.run(append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...); code.code != ExitUsage {
				t.Errorf("exit %d, want %d: %s", code.code, ExitUsage, code.stderr)
			}
		})
	}
	if r := h.run("serve", "--listen", "127.0.0.1:0", "--config", h.path("absent.yaml")); r.code != ExitFail || !strings.Contains(r.stderr, "absent.yaml") {
		t.Errorf("missing config file: %d %s", r.code, r.stderr)
	}
}

// TestServeGatewayOnly: a node that only verifies tokens of a configured
// issuer creates no data directory and no credentials, prints nothing, and
// serves no token endpoints.
func TestServeGatewayOnly(t *testing.T) {
	h := newHarness(t)
	keyPath, idp := h.idp(t)
	data := h.path("data")
	s := h.serve("--listen", "127.0.0.1:0", "--data-dir", data, "--issuer", "https://idp.test/", "--jwks-url", idp.URL)
	defer s.stop()
	admin := s.adminURL(t)
	if out := s.stdout.String(); out != "" {
		t.Errorf("a gateway-only node printed:\n%s", out)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("a gateway-only node created its data directory (%v)", err)
	}
	tok := strings.TrimSpace(h.must("token", "sign", "--key", keyPath, "--iss", "https://idp.test/", "--sub", "bob"))
	if resp := get(t, "http://"+s.addr+"/auth", tok); resp.StatusCode != http.StatusOK {
		t.Errorf("forward-auth: %d", resp.StatusCode)
	}
	for _, u := range []string{"http://" + s.addr + "/.well-known/jwks.json", admin + "/v1/sys/seal-status", admin + "/v1/admin/clients"} {
		if resp := get(t, u, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404 on a gateway-only node", u, resp.StatusCode)
		}
	}
	if code, _ := post(t, "http://"+s.addr+"/oauth2/token", "grant_type=client_credentials", basic("a", "b")); code != http.StatusNotFound {
		t.Errorf("POST /oauth2/token: %d, want 404 on a gateway-only node", code)
	}
	if resp := get(t, admin+"/readyz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("readyz: %d", resp.StatusCode)
	}
	if !strings.Contains(s.stderr.String(), "gateway only") {
		t.Errorf("the log does not say the node runs as a gateway only:\n%s", s.stderr)
	}
}

// TestServeSampleOnlyInDevMode: a working token reaches stdout only in dev
// mode, on the start that created the dev files or when --dev asks again;
// never on a node with a root key of its own.
func TestServeSampleOnlyInDevMode(t *testing.T) {
	h := newHarness(t)
	rootKey := h.path("root.key")
	if err := rootkey.GenerateKeyFile(rootKey, rand.Reader); err != nil {
		t.Fatal(err)
	}
	adminFile := h.write("admin", []byte(strings.Repeat("a", 40)+"\n"))
	dev := h.path("dev")
	for _, tc := range []struct {
		name      string
		env, args []string
		sample    bool
	}{
		{"production node with its own root key", []string{"KEYGATE_TOKEN_SERVICE_ROOT_KEY_FILE=" + rootKey, "KEYGATE_TOKEN_SERVICE_ADMIN_TOKEN_FILE=" + adminFile},
			[]string{"--data-dir", h.path("prod")}, false},
		{"first dev start", nil, []string{"--data-dir", dev}, true},
		{"dev restart reusing the dev files", nil, []string{"--data-dir", dev}, false},
		{"dev restart with --dev", nil, []string{"--data-dir", dev, "--dev"}, true},
	} {
		h.env = tc.env
		s := h.serve(append([]string{"--listen", "127.0.0.1:0"}, tc.args...)...)
		out := s.stdout.String()
		if code := s.stop(); code != ExitOK {
			t.Fatalf("%s: exit %d\n%s", tc.name, code, s.stderr)
		}
		if got := tokenLine.MatchString(out); got != tc.sample {
			t.Errorf("%s: sample token printed %v, want %v:\n%s", tc.name, got, tc.sample, out)
		}
	}
}

// TestServeProbeListener: --probe-listen serves the health checks and
// nothing else of the admin listener.
func TestServeProbeListener(t *testing.T) {
	h := newHarness(t)
	probe := testnet.ClosedAddr(t)
	s := h.serve("--listen", "127.0.0.1:0", "--data-dir", h.path("data"), "--probe-listen", probe)
	defer s.stop()
	s.adminURL(t) // waits for the listening line
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 404, "/debug/pprof/cmdline": 404,
		"/v1/sys/seal-status": 404, "/v1/admin/clients": 404} {
		if resp := get(t, "http://"+probe+path, ""); resp.StatusCode != want {
			t.Errorf("probe %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	if !strings.Contains(s.stderr.String(), "probe="+probe) {
		t.Errorf("the probe address is not logged:\n%s", s.stderr)
	}
}

// TestServeAdminHosts: KEYGATE_ADMIN_HOSTS replaces the file's
// admin_hosts, as every variable replaces its field, and goes through the
// configuration's validation like them.
func TestServeAdminHosts(t *testing.T) {
	h := newHarness(t)
	cfg := h.write("keygate.yaml", []byte("admin_hosts: [file.internal]\n"))
	h.env = []string{"KEYGATE_ADMIN_HOSTS=env.internal:9090"}
	expect(t, h.run("serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data-dir", h.path("data")),
		ExitFail, "", `admin_hosts: "env.internal:9090" is not a host name`)
	h.env = []string{"KEYGATE_ADMIN_HOSTS=env.internal,other.internal"}
	s := h.serve("--config", cfg, "--listen", "127.0.0.1:0", "--data-dir", h.path("data"))
	defer s.stop()
	admin := s.adminURL(t)
	for host, want := range map[string]int{"env.internal": 200, "other.internal": 200, "file.internal": 421, "unknown.internal": 421} {
		req, err := http.NewRequest(http.MethodGet, admin+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestServeURLFiles: a URL and its file cannot both be given (reading the
// files is node's, TestReadURLFiles).
func TestServeURLFiles(t *testing.T) {
	h := newHarness(t)
	good := h.write("db.url", []byte("postgres://u:pw@db.example/keygate\n"))
	h.env = []string{"KEYGATE_DATABASE_URL=postgres://x/y", "KEYGATE_TOKEN_SERVICE_DATABASE_URL_FILE=" + good}
	r := h.run("serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
	expect(t, r, ExitFail, "", "database_url_file: cannot be combined with database_url")
}

// TestDurationFlagErrors: a duration flag without a unit, or with one that
// does not exist, says what a duration looks like.
func TestDurationFlagErrors(t *testing.T) {
	h := newHarness(t)
	for arg, want := range map[string]string{
		"15":  "--ttl 15: a duration needs a unit (ns, us, ms, s, m, h), such as 15s or 15m",
		"30d": `--ttl "30d": not a duration; write a number and a unit`,
	} {
		r := h.run("token", "sign", "--ttl", arg)
		expect(t, r, ExitUsage, "", want)
		if strings.Contains(r.stderr, "parse error") {
			t.Errorf("--ttl %s: the flag package's own message is left: %s", arg, r.stderr)
		}
	}
}

// TestServeConfigFromEnvironmentAndLogs: KEYGATE_CONFIG names the file; its
// log_format (or --log-format) and log_level (or KEYGATE_LOG_LEVEL, or
// --log-level) shape the log; a field set by its KEYGATE_ variable wins
// over the file, a flag over both.
func TestServeConfigFromEnvironmentAndLogs(t *testing.T) {
	h := newHarness(t)
	cfg := h.write("keygate.yaml", []byte("log_level: info\nlog_format: json\nforward_auth: {proxy: caddy}\n"))
	run := func(env []string, args ...string) string {
		h.env = env
		s := h.serve(append([]string{"--listen", "127.0.0.1:0", "--dev", "--data-dir", h.path("data")}, args...)...)
		if code := s.stop(); code != ExitOK {
			t.Fatalf("exit %d: %s", code, s.stderr)
		}
		return s.stderr.String()
	}
	jsonLines := func(logs string) []map[string]any {
		var out []map[string]any
		if strings.TrimSpace(logs) == "" {
			return nil
		}
		for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("log_format json: a line is not JSON: %q", l)
			}
			out = append(out, m)
		}
		return out
	}
	proxy := ""
	for _, m := range jsonLines(run([]string{"KEYGATE_CONFIG=" + cfg, "KEYGATE_FORWARD_AUTH_PROXY=nginx"})) {
		if m["msg"] == "listening" {
			proxy, _ = m["forward_auth_proxy"].(string)
		}
	}
	if proxy != "nginx" {
		t.Errorf("KEYGATE_FORWARD_AUTH_PROXY over the file's caddy: the listening line says %q", proxy)
	}
	for _, m := range jsonLines(run([]string{"KEYGATE_CONFIG=" + cfg, "KEYGATE_LOG_LEVEL=warn"})) {
		if m["level"] == "INFO" || m["level"] == "DEBUG" {
			t.Errorf("KEYGATE_LOG_LEVEL=warn logged %v", m)
		}
	}
	if logs := run([]string{"KEYGATE_CONFIG=" + cfg, "KEYGATE_LOG_LEVEL=warn"}, "--log-format", "text", "--log-level", "info"); !strings.Contains(logs, "level=INFO msg=listening") {
		t.Errorf("--log-format text --log-level info over the file and the environment: %s", logs)
	}
	expect(t, h.run("serve", "--log-format", "xml"), ExitUsage, "", "--log-format (log_format): must be text or json")
}

// TestConfigCheck: config check validates as serve does, connects to
// nothing, and prints the configuration in effect without passwords, with
// the variables that set it and those ignored as empty named.
func TestConfigCheck(t *testing.T) {
	h := newHarness(t)
	good := h.write("good.yaml", []byte("token_service:\n  issuer: https://a.example\n  database_url: postgres://kg:s3cret@unreachable.invalid/keygate\n"))
	h.env = []string{"KEYGATE_TOKEN_SERVICE_REDIS_URL=redis://:hunter2@unreachable.invalid:6379", "KEYGATE_LISTEN=127.0.0.1:7777",
		"KEYGATE_TOKEN_SERVICE_ISSUER=", "KEYGATE_DATABASE_URL="}
	out := h.must("config", "check", good)
	for _, want := range []string{"valid", "listen: 127.0.0.1:7777", "postgres://kg:redacted@unreachable.invalid/keygate", "redis://:redacted@unreachable.invalid:6379",
		"issuer: https://a.example", "# set by the environment: KEYGATE_LISTEN, KEYGATE_TOKEN_SERVICE_REDIS_URL\n",
		"# empty in the environment, ignored: KEYGATE_DATABASE_URL, KEYGATE_TOKEN_SERVICE_ISSUER\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("config check lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") || strings.Contains(out, "hunter2") {
		t.Errorf("config check printed a password:\n%s", out)
	}
	h.env = nil
	for name, c := range map[string]struct{ yaml, want string }{
		"type":                {"cache: {max_ttl: 5}\n", "cache.max_ttl (line 1): want a duration"},
		"database, no issuer": {"token_service: {database_url: postgres://x/y}\n", "needs --issuer"},
		"validation":          {"log_format: xml\n", "log_format: must be text or json"},
	} {
		r := h.run("config", "check", h.write(name+".yaml", []byte(c.yaml)))
		if r.code == ExitOK || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d %s, want %q", name, r.code, r.stderr, c.want)
		}
	}
	// What the file leaves unset is printed at the default serve uses, not
	// as the zero that stands for it.
	minimal := h.write("minimal.yaml", []byte("listen: 127.0.0.1:8081\n"))
	out = h.must("config", "check", minimal)
	for _, want := range []string{"max_entries: 100000\n", "max_ttl: 5m0s\n", "access_token_ttl: 15m0s\n", "signing_alg: ES256\n",
		"key_rotation: 720h0m0s\n", "token_rate_limit: 50\n", "proxy: auto\n", "max_batch_cost: 1000000\n", "sync: interval\n", "checkpoint_every: 1000\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("config check of a minimal file lacks the default %q:\n%s", want, out)
		}
	}
	for _, zero := range []string{"max_entries: 0\n", "access_token_ttl: 0s\n", "signing_alg: \"\"\n"} {
		if strings.Contains(out, zero) {
			t.Errorf("config check printed %q instead of the default:\n%s", zero, out)
		}
	}
	// An issuer that fetches its keys shows the fetch bounds it runs with;
	// one set in the file stays as set.
	remote := h.write("remote.yaml", []byte("issuers:\n  - {issuer: https://a.example/, jwks_url: https://a.example/jwks, "+
		"algorithms: [ES256], audiences: [api], jwks: {max_stale: 1h}}\n"))
	out = h.must("config", "check", remote)
	for _, want := range []string{"min_refresh: 10s\n", "default_refresh: 5m0s\n", "max_refresh: 24h0m0s\n", "max_stale: 1h0m0s\n",
		"timeout: 5s\n", "max_body: 1048576\n", "refetch_interval: 10s\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("config check of a remote issuer lacks %q:\n%s", want, out)
		}
	}
	h.env = []string{"KEYGATE_CONFIG=" + good}
	if out := h.must("config", "check"); !strings.Contains(out, good+": valid") {
		t.Errorf("config check with KEYGATE_CONFIG: %s", out)
	}
	h.env = nil
	expect(t, h.run("config", "check"), ExitUsage, "", "KEYGATE_CONFIG")
}

// TestConfigCheckSecrets: config check prints the secrets section at the
// values serve opens the secret store with: the read cache on at its
// default size on a node's own store, off on a shared one, and a size or
// max age set in the file as set.
func TestConfigCheckSecrets(t *testing.T) {
	const shared = "token_service: {issuer: https://a.example, database_url: postgres://x/y}\n"
	for name, c := range map[string]struct {
		yaml string
		want []string
	}{
		"own store":                {"listen: 127.0.0.1:8081\n", []string{"cache_bytes: 33554432\n", "cache_max_age: 30s\n"}},
		"shared store":             {shared, []string{"cache_bytes: -1\n", "cache_max_age: 30s\n"}},
		"shared store, size set":   {shared + "secrets: {cache_bytes: 1048576, cache_max_age: 5s}\n", []string{"cache_bytes: 1048576\n", "cache_max_age: 5s\n"}},
		"own store, cache off":     {"secrets: {cache_bytes: -1}\n", []string{"cache_bytes: -1\n", "cache_max_age: 30s\n"}},
		"shared store from a file": {"token_service: {issuer: https://a.example, database_url_file: /nonexistent/db-url}\n", []string{"cache_bytes: -1\n"}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			out := h.must("config", "check", h.write("c.yaml", []byte(c.yaml)))
			_, sec, ok := strings.Cut(out, "\nsecrets:\n")
			if !ok {
				t.Fatalf("config check prints no secrets section:\n%s", out)
			}
			for _, want := range c.want {
				if !strings.Contains(sec, "    "+want) {
					t.Errorf("secrets section lacks %q:\nsecrets:\n%s", want, sec)
				}
			}
		})
	}
}

// curlHeader is a header of the printed curl command line.
var curlHeader = regexp.MustCompile(`-H '([^:']+): ([^']*)'`)

// TestServeTryItBehindProxy: under each --proxy preset, the curl command
// serve prints, run as printed, is answered 200 for the sample token: it
// sends the forwarding headers that preset requires.
func TestServeTryItBehindProxy(t *testing.T) {
	for _, proxy := range []string{"auto", "nginx", "traefik", "caddy", "envoy"} {
		t.Run(proxy, func(t *testing.T) {
			h := newHarness(t)
			s := h.serve("--listen", "127.0.0.1:0", "--data-dir", h.path("data"), "--proxy", proxy)
			defer s.stop()
			var line string
			for _, l := range strings.Split(s.stdout.String(), "\n") {
				if strings.HasPrefix(l, "curl -i ") {
					line = l
				}
			}
			if line == "" {
				t.Fatalf("no curl line:\n%s", s.stdout)
			}
			url := line[strings.LastIndex(line, " ")+1:]
			req, err := http.NewRequest(http.MethodGet, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range curlHeader.FindAllStringSubmatch(line, -1) {
				req.Header.Set(m[1], m[2])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Auth-Subject") != "demo" {
				t.Errorf("%s: %d %s", line, resp.StatusCode, body)
			}
		})
	}
}
