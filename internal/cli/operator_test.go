package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/rootkey"
)

func TestOperatorInitUsage(t *testing.T) {
	h := newHarness(t)
	for _, args := range [][]string{
		{"operator", "init", "--out", h.path("a")},                                        // no database
		{"operator", "init", "--database-url", "postgres://x/y"},                          // neither --out nor --print
		{"operator", "init", "--database-url", "postgres://x/y", "--out", "d", "--print"}, // both
		{"operator", "init", "--database-url", "postgres://x/y", "--print", "--signing-alg", "HS256"},
	} {
		if r := h.run(args...); r.code != ExitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, r.code, ExitUsage, r.stderr)
		}
	}
	if _, err := os.Stat(h.path("a")); err == nil {
		t.Error("a refused init created its output directory")
	}
}

// TestOperatorInitFlow is a fleet's set-up end to end: operator init
// writes the root key and admin token, a node on the store starts sealed,
// a random key does not unseal it, the written key does; a second init
// changes nothing and leaves no files behind.
func TestOperatorInitFlow(t *testing.T) {
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	dbURL := cliSchema(t, base)
	h := newHarness(t)
	secrets := h.path("secrets")
	out := h.must("operator", "init", "--database-url", dbURL, "--out", secrets)
	keyFile, tokenFile := filepath.Join(secrets, "root.key"), filepath.Join(secrets, "admin.token")
	for _, p := range []string{keyFile, tokenFile} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %04o", p, fi.Mode().Perm())
		}
	}
	root, err := rootkey.LoadKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Destroy()
	token, _ := os.ReadFile(tokenFile)
	if len(strings.TrimSpace(string(token))) < 32 || strings.Contains(out, strings.TrimSpace(string(token))) {
		t.Errorf("admin token %d characters, printed: %v", len(strings.TrimSpace(string(token))), strings.Contains(out, string(token)))
	}
	if !strings.Contains(out, root.ID().String()) || !strings.Contains(out, "keygate unseal --key-file") {
		t.Errorf("operator init printed:\n%s", out)
	}

	// A second init, into fresh files: refused, and its files removed.
	again := h.path("again")
	if r := h.run("operator", "init", "--database-url", dbURL, "--out", again); r.code != ExitFail || !strings.Contains(r.stderr, "already") {
		t.Errorf("a second init: %d %s", r.code, r.stderr)
	}
	if entries, _ := os.ReadDir(again); len(entries) != 0 {
		t.Errorf("a refused init left %v", entries)
	}
	if r := h.run("operator", "init", "--database-url", dbURL, "--print"); r.code != ExitFail || strings.Contains(r.stdout, "root_key") {
		t.Errorf("a second init with --print: %d\n%s", r.code, r.stdout)
	}

	// The node starts with the command init printed, as printed.
	h.env = printedEnv(t, out)
	s := h.serve("--listen", "127.0.0.1:0", "--data-dir", h.path("data"))
	h.env = nil
	defer s.stop()
	adminURL := s.adminURL(t)
	other := h.path("other.key")
	if err := rootkey.GenerateKeyFile(other, nil); err != nil {
		t.Fatal(err)
	}
	if r := h.run("unseal", "--admin", adminURL, "--key-file", other); r.code != ExitFail || !strings.Contains(r.stderr, "400") {
		t.Errorf("unseal with another key: %d %s", r.code, r.stderr)
	}
	if out := h.must("unseal", "--admin", adminURL, "--key-file", keyFile); !strings.Contains(out, `"sealed": false`) {
		t.Errorf("unseal with the init key printed %q", out)
	}
	h.must("seal", "--admin", adminURL, "--admin-token-file", tokenFile)
}

// printedEnv returns the variables of the "... keygate serve" line out
// prints, unquoted.
func printedEnv(t *testing.T, out string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		cmd, ok := strings.CutSuffix(strings.TrimSpace(line), " keygate serve")
		if !ok {
			continue
		}
		var env []string
		for _, m := range regexp.MustCompile(`(KEYGATE_[A-Z_]+)=('[^']*'|\S*)`).FindAllStringSubmatch(cmd, -1) {
			env = append(env, m[1]+"="+strings.Trim(m[2], "'"))
		}
		return env
	}
	t.Fatalf("no keygate serve command printed:\n%s", out)
	return nil
}

// TestOperatorInitPrint: --print writes nothing and prints the
// credentials once, as JSON a secret store can take.
func TestOperatorInitPrint(t *testing.T) {
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	h := newHarness(t)
	out := h.must("operator", "init", "--database-url", cliSchema(t, base), "--print", "--signing-alg", "EdDSA")
	var got struct {
		RootKey    string `json:"root_key"`
		RootKeyID  string `json:"root_key_id"`
		AdminToken string `json:"admin_token"`
		SigningKID string `json:"signing_kid"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	root, err := rootkey.ParseKey([]byte(got.RootKey))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Destroy()
	if root.ID().String() != got.RootKeyID || len(got.AdminToken) < 32 || got.SigningKID == "" {
		t.Errorf("printed %+v", got)
	}
	if entries, _ := os.ReadDir(h.dir); len(entries) != 0 {
		t.Errorf("--print wrote %v", entries)
	}
}
