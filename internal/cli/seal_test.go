package cli

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/keygate/keygate/internal/rootkey"
)

// TestPassphraseSealFlow is an operator's passphrase set-up end to end:
// keyring init, serve starting sealed, clients created while sealed,
// unseal with the passphrase on standard input, tokens, seal again.
func TestPassphraseSealFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: an operator's passphrase set-up end to end, each unseal an Argon2id derivation; run without -short")
	}
	const pass = "a long unseal passphrase"
	h := newHarness(t)
	data := h.path("data")
	h.stdin = "short\n"
	if r := h.run("keyring", "init", "--data-dir", data); r.code != ExitFail || !strings.Contains(r.stderr, "too short") {
		t.Fatalf("keyring init with a short passphrase: %d %s", r.code, r.stderr)
	}
	h.stdin = pass + "\n"
	if out := h.must("keyring", "init", "--data-dir", data); !strings.Contains(out, "keyring.json") {
		t.Errorf("keyring init printed %q", out)
	}
	if r := h.run("keyring", "init", "--data-dir", data); r.code != ExitFail {
		t.Errorf("keyring init over an existing header: %d", r.code)
	}
	tokenFile := h.path("admin.token")
	if err := os.WriteFile(tokenFile, []byte(strings.Repeat("k", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	h.env = []string{"KEYGATE_TOKEN_SERVICE_ADMIN_TOKEN_FILE=" + tokenFile}
	s := h.serve("--listen", "127.0.0.1:0", "--data-dir", data)
	h.env = nil
	defer s.stop()
	if !strings.Contains(s.stdout.String(), "keygate is sealed") {
		t.Errorf("serve did not say it is sealed:\n%s", s.stdout)
	}
	adminURL := s.adminURL(t)
	admin := []string{"--admin", adminURL, "--admin-token-file", tokenFile}
	out := h.must(append([]string{"clients", "create", "--name", "svc"}, admin...)...)
	idm, secm := clientIDLine.FindStringSubmatch(out), clientSecretLine.FindStringSubmatch(out)
	if idm == nil || secm == nil {
		t.Fatalf("clients create while sealed printed %q", out)
	}
	token := []string{"token", "--client", idm[1], "--secret", secm[1], "--url", "http://" + s.addr}
	if r := h.run(token...); r.code != ExitFail || !strings.Contains(r.stderr, "temporarily_unavailable") {
		t.Fatalf("token while sealed: %d %s", r.code, r.stderr)
	}

	h.stdin = "not the passphrase\n"
	if r := h.run("unseal", "--admin", adminURL); r.code != ExitFail || !strings.Contains(r.stderr, "wrong unseal passphrase") {
		t.Errorf("unseal with a wrong passphrase: %d %s", r.code, r.stderr)
	}
	h.stdin = pass + "\n"
	if out := h.must("unseal", "--admin", adminURL); !strings.Contains(out, `"sealed": false`) {
		t.Errorf("unseal printed %q", out)
	}
	h.must(token...)

	if out := h.must(append([]string{"seal"}, admin...)...); !strings.Contains(out, `"sealed": true`) {
		t.Errorf("seal printed %q", out)
	}
	if r := h.run(token...); r.code != ExitFail {
		t.Errorf("token after seal: %d", r.code)
	}
	passFile := filepath.Join(h.dir, "pass")
	if err := os.WriteFile(passFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.must("unseal", "--admin", adminURL, "--passphrase-file", passFile)
	h.must(token...)
	if strings.Contains(s.stderr.String(), pass) {
		t.Error("the passphrase reached the logs")
	}
}

// TestSealCommandsSendJSON: keygate unseal and keygate seal send what the
// node's seal endpoints now require, a JSON body with Content-Type
// application/json, and no Origin header. Before the fix keygate seal
// sent no Content-Type (the node answered 415).
func TestSealCommandsSendJSON(t *testing.T) {
	type seen struct {
		path, contentType string
		origin            bool
		body              []byte
	}
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, origin := r.Header["Origin"]
		mu.Lock()
		got = append(got, seen{r.URL.Path, r.Header.Get("Content-Type"), origin, b})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"sealed":false}`)
	}))
	defer srv.Close()
	h := newHarness(t)
	keyFile := h.path("root.key")
	if err := rootkey.GenerateKeyFile(keyFile, rand.Reader); err != nil {
		t.Fatal(err)
	}
	tokenFile := h.write("admin.token", []byte(strings.Repeat("k", 40)+"\n"))
	h.must("unseal", "--admin", srv.URL, "--key-file", keyFile)
	h.stdin = "a long unseal passphrase\n"
	h.must("unseal", "--admin", srv.URL)
	h.must("seal", "--admin", srv.URL, "--admin-token-file", tokenFile)
	if len(got) != 3 {
		t.Fatalf("%d requests, want 3", len(got))
	}
	for _, r := range got {
		if r.contentType != "application/json" || r.origin || !json.Valid(r.body) {
			t.Errorf("%s: Content-Type %q, Origin sent %v, body %q", r.path, r.contentType, r.origin, r.body)
		}
	}
}
