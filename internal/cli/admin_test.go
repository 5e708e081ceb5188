package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/jose"
)

// TestAdminCommands drives users, the node's signing keys and revocations
// through the CLI against a running `serve --dev`.
func TestAdminCommands(t *testing.T) {
	h := newHarness(t)
	s, admin := h.serveDev(t)
	out := s.stdout.String()
	id, secret := clientIDLine.FindStringSubmatch(out)[1], clientSecretLine.FindStringSubmatch(out)[1]
	base := "http://" + s.addr

	// Users: created with the password on stdin, who can then log in.
	h.stdin = "a strong password\n"
	created := h.must(append([]string{"users", "create", "--username", "alice", "--scopes", "demo"}, admin...)...)
	if !strings.HasPrefix(created, "user_id=kgu_") {
		t.Fatalf("users create printed %q", created)
	}
	userID := strings.TrimSpace(strings.TrimPrefix(created, "user_id="))
	if list := h.must(append([]string{"users", "list"}, admin...)...); !strings.Contains(list, userID+"\talice\tdemo") {
		t.Errorf("users list: %q", list)
	}
	login := url.Values{"username": {"alice"}, "password": {"a strong password"}}.Encode()
	if code, body := post(t, base+"/v1/login", login, basic(id, secret)); code != http.StatusOK {
		t.Fatalf("login as the created user: %d %s", code, body)
	}
	// Update: disable, enable, a new password.
	h.must(append([]string{"users", "update", "--disable", userID}, admin...)...)
	if code, _ := post(t, base+"/v1/login", login, basic(id, secret)); code != http.StatusUnauthorized {
		t.Errorf("login after users update --disable: %d", code)
	}
	h.must(append([]string{"users", "update", "--enable", "--scopes", "demo,extra", userID}, admin...)...)
	if list := h.must(append([]string{"users", "list"}, admin...)...); !strings.Contains(list, userID+"\talice\tdemo extra") || strings.Contains(list, "disabled") {
		t.Errorf("users list after update: %q", list)
	}
	h.stdin = "another strong password\n"
	h.must(append([]string{"users", "update", "--password", userID}, admin...)...)
	if code, _ := post(t, base+"/v1/login", login, basic(id, secret)); code != http.StatusUnauthorized {
		t.Errorf("the old password after users update --password: %d", code)
	}
	login = url.Values{"username": {"alice"}, "password": {"another strong password"}}.Encode()
	if code, body := post(t, base+"/v1/login", login, basic(id, secret)); code != http.StatusOK {
		t.Errorf("the new password: %d %s", code, body)
	}
	expect(t, h.run(append([]string{"users", "update", userID}, admin...)...), ExitUsage, "", "nothing to change")

	h.must(append([]string{"users", "delete", userID}, admin...)...)
	if code, _ := post(t, base+"/v1/login", login, basic(id, secret)); code != http.StatusUnauthorized {
		t.Errorf("login after users delete: %d", code)
	}

	// Keys: an immediate rotation signs the next token with the new kid.
	keys := h.must(append([]string{"keys", "list"}, admin...)...)
	if strings.Count(keys, "\n") != 2 || !strings.HasPrefix(keys, "KID\tALG\t") || !strings.HasSuffix(strings.TrimSpace(keys), "\tsigning") {
		t.Fatalf("keys list before rotation: %q", keys)
	}
	rot := h.must(append([]string{"keys", "rotate", "--immediate"}, admin...)...)
	kid := strings.TrimSpace(strings.TrimPrefix(rot, "kid="))
	if keys := h.must(append([]string{"keys", "list"}, admin...)...); strings.Count(keys, "\n") != 3 || !strings.Contains(keys, kid) {
		t.Errorf("keys list after rotation: %q", keys)
	}
	tok := strings.TrimSpace(h.must("token", "--client", id, "--secret", secret, "--url", base))
	hdr, _ := base64.RawURLEncoding.DecodeString(strings.SplitN(tok, ".", 2)[0])
	if !strings.Contains(string(hdr), `"kid":"`+kid+`"`) {
		t.Errorf("token after rotation has header %s, want kid %s", hdr, kid)
	}

	// Revocations: by jti, then everything of the subject.
	if resp := get(t, base+"/auth", tok); resp.StatusCode != http.StatusOK {
		t.Fatalf("/auth with a fresh token: %d", resp.StatusCode)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	var claims struct {
		JTI string `json:"jti"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	h.must(append([]string{"revoke", "--jti", claims.JTI}, admin...)...)
	if resp := get(t, base+"/auth", tok); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/auth after revoke --jti: %d", resp.StatusCode)
	}
	tok2 := strings.TrimSpace(h.must("token", "--client", id, "--secret", secret, "--url", base))
	h.must(append([]string{"revoke", "--subject", id, "--before", time.Now().Add(time.Second).UTC().Format(time.RFC3339)}, admin...)...)
	if resp := get(t, base+"/auth", tok2); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/auth after revoke --subject: %d", resp.StatusCode)
	}

	for _, args := range [][]string{
		{"revoke"},
		{"revoke", "--jti", "x", "--subject", "y"},
		{"revoke", "--jti", "x", "--before", "2030-01-01T00:00:00Z"},
		{"revoke", "--subject", "y", "--until", "tomorrow"},
		{"revoke", "--jti", "x", "--until", "tomorrow"},
		{"users", "create"},
	} {
		if r := h.run(append(args, admin...)...); r.code != ExitUsage {
			t.Errorf("keygate %s: exit %d, want %d (%s)", strings.Join(args, " "), r.code, ExitUsage, r.stderr)
		}
	}
}

// TestRevokeIssuer: `keygate revoke --issuer` revokes, by jti and by
// subject, the tokens of an issuer the node's gateway trusts (here a
// key_files one), which /auth then refuses; an issuer it does not trust is
// an error naming it.
func TestRevokeIssuer(t *testing.T) {
	h := newHarness(t)
	const idp = "https://idp.cli.test/"
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.ES256, "k1", k)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := jose.NewKeySet(signer.Key()).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	keys := h.write("idp.jwks.json", jwks)
	cfg := h.write("keygate.yaml", []byte("issuers:\n  - {issuer: "+idp+", key_files: ["+keys+"], algorithms: [ES256], audiences: [api]}\n"))
	data := h.path("data")
	s := h.serve("--listen", "127.0.0.1:0", "--dev", "--data-dir", data, "--config", cfg)
	t.Cleanup(func() { s.stop() })
	admin := []string{"--admin", s.adminURL(t), "--admin-token-file", filepath.Join(data, "admin.token")}
	base := "http://" + s.addr
	mint := func(jti, sub string) string {
		t.Helper()
		tok, err := signer.SignClaims(map[string]any{"iss": idp, "aud": "api", "jti": jti, "sub": sub,
			"iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	byJTI, bySub := mint("j-1", "alice"), mint("j-2", "bob")
	for _, tok := range []string{byJTI, bySub} {
		if resp := get(t, base+"/auth", tok); resp.StatusCode != http.StatusOK {
			t.Fatalf("/auth with the idp's token before revoking: %d", resp.StatusCode)
		}
	}
	h.must(append([]string{"revoke", "--issuer", idp, "--jti", "j-1"}, admin...)...)
	h.must(append([]string{"revoke", "--issuer", idp, "--subject", "bob", "--until", time.Now().Add(90 * 24 * time.Hour).UTC().Format(time.RFC3339)}, admin...)...)
	for _, tok := range []string{byJTI, bySub} {
		if resp := get(t, base+"/auth", tok); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("/auth with the idp's revoked token: %d, want 401", resp.StatusCode)
		}
	}
	if resp := get(t, base+"/auth", mint("j-3", "carol")); resp.StatusCode != http.StatusOK {
		t.Errorf("/auth with another idp token: %d", resp.StatusCode)
	}
	r := h.run(append([]string{"revoke", "--issuer", "https://unknown.test/", "--subject", "bob"}, admin...)...)
	if r.code == ExitOK || !strings.Contains(r.stderr, "https://unknown.test/") {
		t.Errorf("revoke for an untrusted issuer: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestAdminURLFromEnvironment: KEYGATE_ADMIN_URL is the admin commands'
// default --admin.
func TestAdminURLFromEnvironment(t *testing.T) {
	h := newHarness(t)
	s, admin := h.serveDev(t)
	_ = s
	h.env = []string{"KEYGATE_ADMIN_URL=" + admin[1]}
	if out := h.must("tenants", "list", admin[2], admin[3]); !strings.Contains(out, "default\t") {
		t.Errorf("tenants list through KEYGATE_ADMIN_URL: %q", out)
	}
	h.env = []string{"KEYGATE_ADMIN_URL=http://127.0.0.1:1"}
	if r := h.run("tenants", "list", admin[2], admin[3]); r.code != ExitFail {
		t.Errorf("KEYGATE_ADMIN_URL pointing nowhere: %d %s", r.code, r.stderr)
	}
}

// TestStatus: status shows a ready node's parts, names what it could not
// read, and exits 1 on a sealed node, saying why it is not ready.
func TestStatus(t *testing.T) {
	h := newHarness(t)
	_, admin := h.serveDev(t)
	out := h.must(append([]string{"status"}, admin...)...)
	for _, want := range []string{"health    ok", "ready     yes", "sealed    false", "(signing)", "audit     enabled true, ready true"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	var st nodeStatus
	if err := json.Unmarshal([]byte(h.must(append([]string{"status", "--json"}, admin...)...)), &st); err != nil || len(st.Keys) != 1 || st.Health != "ok" {
		t.Errorf("status --json: %+v %v", st, err)
	}
	if out := h.must("status", admin[0], admin[1], "--admin-token-file", h.path("nope")); !strings.Contains(out, "note      signing keys: admin token") {
		t.Errorf("status without the admin token: %s", out)
	}
	if strings.Contains(out, "rekey") {
		t.Errorf("status names a rotation before any:\n%s", out)
	}
	// After a root-key rotation (a dev node reads its own current key).
	h.must(append([]string{"operator", "rekey", "--generate", h.path("next.key"), "--wait"}, admin...)...)
	if out := h.must(append([]string{"status"}, admin...)...); !strings.Contains(out, "rekey     done, ") || !strings.Contains(out, "finished ") {
		t.Errorf("status after a rotation:\n%s", out)
	}

	// A sealed node: not ready, and status says why.
	const pass = "a long unseal passphrase"
	data := h.path("sealed")
	h.stdin = pass + "\n"
	h.must("keyring", "init", "--data-dir", data)
	s := h.serve("--listen", "127.0.0.1:0", "--data-dir", data)
	defer s.stop()
	r := h.run("status", "--admin", s.adminURL(t))
	if r.code != ExitFail || !strings.Contains(r.stdout, "ready     no:") || !strings.Contains(r.stdout, `"reasons":["sealed"`) {
		t.Errorf("status of a sealed node: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	expect(t, h.run("status", "--admin", "http://127.0.0.1:1"), ExitFail, "", "does not answer")
}

// TestAdminCLIMisdirected: the admin CLI says what is wrong when its token
// is not the node's, and when it is pointed at the traffic listener.
func TestAdminCLIMisdirected(t *testing.T) {
	h := newHarness(t)
	s, admin := h.serveDev(t)
	wrong := h.write("wrong.token", []byte(strings.Repeat("w", 40)+"\n"))
	r := h.run("clients", "list", "--admin", admin[1], "--admin-token-file", wrong)
	if r.code != ExitFail || !strings.Contains(r.stderr, "the admin token was refused") || strings.Contains(r.stderr, "bearer token is required") {
		t.Errorf("a wrong admin token: exit %d %s", r.code, r.stderr)
	}
	r = h.run("clients", "list", "--admin", "http://"+s.addr, admin[2], admin[3])
	if r.code != ExitFail || !strings.Contains(r.stderr, "is not keygate's admin listener (did you mean :9090?)") {
		t.Errorf("the traffic listener as --admin: exit %d %s", r.code, r.stderr)
	}
	h.must("clients", "list", admin[0], admin[1], admin[2], admin[3])
}
