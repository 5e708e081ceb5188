package cli

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/testnet"
)

var (
	clientIDLine     = regexp.MustCompile(`(?m)^client_id=(\S+)$`)
	clientSecretLine = regexp.MustCompile(`(?m)^client_secret=(\S+)$`)
	adminAddrLog     = regexp.MustCompile(`admin=(\S+)`)
)

// post sends a form (or JSON when body starts with "{") and returns the
// status and body.
func post(t *testing.T, url, body string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func basic(id, secret string) http.Header {
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	return http.Header{"Authorization": {req.Header.Get("Authorization")}}
}

// serveTokenFlow runs `serve` with args twice on one store: the first run
// prints the demo client, whose token /auth accepts until it is revoked;
// the admin API needs the admin token; the second run keeps the kid and
// prints no demo client.
func serveTokenFlow(t *testing.T, h *harness, adminToken func(stdout string) string, args ...string) {
	s := h.serve(append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	out := s.stdout.String()
	idm, secm := clientIDLine.FindStringSubmatch(out), clientSecretLine.FindStringSubmatch(out)
	if idm == nil || secm == nil {
		s.stop()
		t.Fatalf("no demo client on stdout:\n%s", out)
	}
	id, secret := idm[1], secm[1]
	if want := "curl -s -u '" + id + ":" + secret + "' -d grant_type=client_credentials http://" + s.addr + "/oauth2/token"; !strings.Contains(out, want) {
		t.Errorf("stdout lacks %q:\n%s", want, out)
	}
	base := "http://" + s.addr
	code, body := post(t, base+"/oauth2/token", "grant_type=client_credentials", basic(id, secret))
	if code != http.StatusOK {
		t.Fatalf("token: %d %s", code, body)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal([]byte(body), &tr); err != nil || tr.AccessToken == "" {
		t.Fatalf("token response %s: %v", body, err)
	}
	resp := get(t, base+"/auth", tr.AccessToken)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Auth-Subject") != id {
		t.Fatalf("/auth with the issued token: %d %v", resp.StatusCode, resp.Header)
	}
	if code, body := post(t, base+"/oauth2/revoke", "token="+url.QueryEscape(tr.AccessToken), basic(id, secret)); code != http.StatusOK {
		t.Fatalf("revoke: %d %s", code, body)
	}
	resp = get(t, base+"/auth", tr.AccessToken)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "revoked") {
		t.Errorf("/auth after revoke: %d %v", resp.StatusCode, resp.Header)
	}
	admin := s.adminURL(t) + "/v1/admin/clients"
	if code, _ := post(t, admin, `{"name":"x","scopes":["demo"]}`, nil); code != http.StatusUnauthorized {
		t.Errorf("admin API without the token: %d", code)
	}
	tok := adminToken(out)
	if code, body := post(t, admin, `{"name":"x","scopes":["demo"]}`, http.Header{"Authorization": {"Bearer " + tok}}); code != http.StatusCreated {
		t.Errorf("admin API with the token: %d %s", code, body)
	}
	if code := s.stop(); code != ExitOK {
		t.Fatalf("serve exit %d:\n%s", code, s.stderr)
	}
	kid := regexp.MustCompile(`kid=(\S+)`).FindStringSubmatch(s.stderr.String())

	again := h.serve(append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	if code := again.stop(); code != ExitOK {
		t.Fatalf("second serve exit %d:\n%s", code, again.stderr)
	}
	if o := again.stdout.String(); strings.Contains(o, "client_secret=") || strings.Contains(o, "Admin token") {
		t.Errorf("second run printed secrets again:\n%s", o)
	}
	if kid == nil || !strings.Contains(again.stderr.String(), "kid="+kid[1]) {
		t.Errorf("second run changed the signing kid (%v):\n%s", kid, again.stderr)
	}
}

func TestServeDevTokenService(t *testing.T) {
	h := newHarness(t)
	data := h.path("data")
	serveTokenFlow(t, h, func(stdout string) string {
		b, err := os.ReadFile(data + "/admin.token")
		if err != nil {
			t.Fatal(err)
		}
		tok := strings.TrimSpace(string(b))
		if len(tok) < 32 || !strings.Contains(stdout, tok) || !strings.Contains(stdout, data+"/admin.token") {
			t.Errorf("admin token (%d chars) or its path not printed:\n%s", len(tok), stdout)
		}
		return tok
	}, "--dev", "--data-dir", data)
}

func TestServePostgresTokenService(t *testing.T) {
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	dbURL := cliSchema(t, base)
	h := newHarness(t)
	h.env = []string{"KEYGATE_DATABASE_URL=" + dbURL}
	if r := h.run("serve", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--data-dir", h.path("d0"), "--issuer", "https://kg.test"); r.code != ExitFail || !strings.Contains(r.stderr, "root key") {
		t.Errorf("a database URL without a root key: %d %s", r.code, r.stderr)
	}
	rootKey := h.path("root.key")
	if err := rootkey.GenerateKeyFile(rootKey, rand.Reader); err != nil {
		t.Fatal(err)
	}
	adminFile := h.write("admin", []byte(strings.Repeat("a", 40)+"\n"))
	h.env = []string{"KEYGATE_DATABASE_URL=" + dbURL, "KEYGATE_TOKEN_SERVICE_ROOT_KEY_FILE=" + rootKey, "KEYGATE_TOKEN_SERVICE_ADMIN_TOKEN_FILE=" + adminFile}
	serveTokenFlow(t, h, func(string) string { return strings.Repeat("a", 40) },
		"--dev", "--data-dir", h.path("data"), "--issuer", "https://kg.test")
}

func cliSchema(t *testing.T, base string) string {
	t.Helper()
	return testnet.PostgresSchema(t, base, "kg_cli")
}

// TestServeLoginIPv6Prefix: token_service.ipv6_prefix reaches the
// per-address login limit (here 128: two addresses of one /64 are two
// budgets), from the environment and from the configuration file.
func TestServeLoginIPv6Prefix(t *testing.T) {
	h := newHarness(t)
	cfg := h.write("keygate.yaml", []byte("token_service:\n  ipv6_prefix: 128\n"))
	trusted := "KEYGATE_TOKEN_SERVICE_TRUSTED_PROXIES=127.0.0.1"
	for name, tc := range map[string]struct{ env, args []string }{
		"environment": {[]string{trusted, "KEYGATE_TOKEN_SERVICE_IPV6_PREFIX=128"}, nil},
		"file":        {[]string{trusted}, []string{"--config", cfg}},
	} {
		h.env = tc.env
		s := h.serve(append([]string{"--listen", "127.0.0.1:0", "--dev", "--data-dir", h.path("data-" + name)}, tc.args...)...)
		out := s.stdout.String()
		hdr := basic(clientIDLine.FindStringSubmatch(out)[1], clientSecretLine.FindStringSubmatch(out)[1])
		attempt := func(user, from string) int {
			h := hdr.Clone()
			h.Set("X-Forwarded-For", from)
			code, _ := post(t, "http://"+s.addr+"/v1/login", "username="+user+"&password=wrong+password", h)
			return code
		}
		for i := range 5 { // the login limit's burst
			if code := attempt(fmt.Sprint("user", i), "2001:db8::1"); code != http.StatusUnauthorized {
				t.Fatalf("%s: attempt %d: %d", name, i, code)
			}
		}
		if code := attempt("another", "2001:db8::1"); code != http.StatusTooManyRequests {
			t.Errorf("%s: an attempt past the burst from the same address: %d, want 429", name, code)
		}
		if code := attempt("yet-another", "2001:db8::2"); code != http.StatusUnauthorized {
			t.Errorf("%s: an attempt from another address of the /64: %d, want 401 (counted by /128)", name, code)
		}
		if code := s.stop(); code != ExitOK {
			t.Errorf("%s: serve exit %d", name, code)
		}
	}
}
