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
	r := h.run("serve", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--data-dir", h.path("data"),
		"--redis-url", "http://127.0.0.1:6379")
	if r.code != ExitFail || !strings.Contains(r.stderr, "redis URL") {
		t.Errorf("serve with a non-Redis URL: %d %s", r.code, r.stderr)
	}
}

// TestServeFleetTraps: a fleet setting that cannot work is refused before
// anything connects, naming the flag: a node on a shared database without
// an issuer (each would default to its own listen address), and a
// revocation staleness bound without Redis.
func TestServeFleetTraps(t *testing.T) {
	h := newHarness(t)
	cfg := h.write("ts.yaml", []byte("token_service:\n  database_url: postgres://unreachable.invalid/x\n"))
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"database without issuer", []string{"--database-url", "postgres://unreachable.invalid/x"}, "needs --issuer"},
		{"database in the file without issuer", []string{"--config", cfg}, "needs --issuer"},
		{"staleness without Redis", []string{"--dev", "--revocation-max-staleness", "5s"}, "needs --redis-url"},
		{"staleness below a second, with Redis", []string{"--dev", "--redis-url", "redis://unreachable.invalid:6379", "--revocation-max-staleness", "500ms"}, "above 1s"},
	} {
		start := time.Now()
		r := h.run(append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--data-dir", h.path("d-" + c.name)}, c.args...)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d %s, want a usage error with %q", c.name, r.code, r.stderr, c.want)
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
	r := h.run("serve", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--data-dir", data, "--keyring-file", h.path("nope/keyring.json"))
	if r.code != ExitFail || !strings.Contains(r.stderr, "keygate keyring init") {
		t.Errorf("serve with a missing --keyring-file: %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "root.key")); !os.IsNotExist(err) {
		t.Errorf("a dev root key was generated instead (%v)", err)
	}
}
