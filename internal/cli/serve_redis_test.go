package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServeRedisURLRefused(t *testing.T) {
	h := newHarness(t)
	h.env = []string{"KEYGATE_REDIS_URL=http://127.0.0.1:6379"}
	r := h.run("serve", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--data-dir", h.path("data"))
	if r.code != ExitFail || !strings.Contains(r.stderr, "token_service.redis_url: must be a redis:// or rediss:// URL") {
		t.Errorf("serve with a non-Redis URL: %d %s", r.code, r.stderr)
	}
}

// TestServeFleetTraps: a fleet setting that cannot work is refused before
// anything connects, naming the setting: a node on a shared database
// without an issuer (each would default to its own listen address), and a
// revocation staleness bound without Redis, or too tight (the
// configuration's own check).
func TestServeFleetTraps(t *testing.T) {
	h := newHarness(t)
	cfg := h.write("ts.yaml", []byte("token_service:\n  database_url: postgres://unreachable.invalid/x\n"))
	for _, c := range []struct {
		name      string
		env, args []string
		code      int
		want      string
	}{
		{"database without issuer", []string{"KEYGATE_DATABASE_URL=postgres://unreachable.invalid/x"}, nil, ExitUsage, "needs --issuer"},
		{"database in the file without issuer", nil, []string{"--config", cfg}, ExitUsage, "needs --issuer"},
		{"staleness without Redis", []string{"KEYGATE_TOKEN_SERVICE_REVOCATION_MAX_STALENESS=5s"}, []string{"--dev"}, ExitUsage, "needs a Redis URL"},
		{"staleness below a second, with Redis", []string{"KEYGATE_REDIS_URL=redis://unreachable.invalid:6379", "KEYGATE_TOKEN_SERVICE_REVOCATION_MAX_STALENESS=500ms"},
			[]string{"--dev"}, ExitFail, "token_service.revocation_max_staleness: must be above 1s"},
	} {
		start := time.Now()
		h.env = c.env
		r := h.run(append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--data-dir", h.path("d-" + c.name)}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d %s, want %d with %q", c.name, r.code, r.stderr, c.code, c.want)
		}
		if time.Since(start) > 2*time.Second {
			t.Errorf("%s: took %v: something was tried before the refusal", c.name, time.Since(start))
		}
		if _, err := os.Stat(h.path("d-" + c.name)); !os.IsNotExist(err) {
			t.Errorf("%s: the data directory was created before the refusal (%v)", c.name, err)
		}
	}
}

// TestServeMissingKeyringFile: a keyring file named but missing is an
// error, never a fall-back to a generated dev root key.
func TestServeMissingKeyringFile(t *testing.T) {
	h := newHarness(t)
	data := h.path("data")
	h.env = []string{"KEYGATE_TOKEN_SERVICE_KEYRING_FILE=" + h.path("nope/keyring.json")}
	r := h.run("serve", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--data-dir", data)
	if r.code != ExitFail || !strings.Contains(r.stderr, "keygate keyring init") {
		t.Errorf("serve with a missing keyring_file: %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "root.key")); !os.IsNotExist(err) {
		t.Errorf("a dev root key was generated instead (%v)", err)
	}
}
