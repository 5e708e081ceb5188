//go:build unix

package cli

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/testnet"
)

// TestSIGHUPReload: `keygate serve --config` reloads its file on SIGHUP. The
// new file has the same size and modification time as the old one, so the
// file watcher cannot see the change and only the signal can apply it.
func TestSIGHUPReload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the keygate binary")
	}
	bin := buildKeygate(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "keygate.yaml")
	rule := func(prefix string) []byte {
		return []byte("forward_auth:\n  rules:\n    - {path_prefix: " + prefix + ", anonymous: true}\n    - {path_prefix: /}\n")
	}
	if err := os.WriteFile(cfg, rule("/aaaa"), 0o600); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := testnet.ClosedAddr(t)
	c := startChild(t, bin, []string{"serve", "--dev", "--data-dir", filepath.Join(dir, "data"), "--config", cfg,
		"--listen", addr, "--admin-listen", testnet.ClosedAddr(t)}, addr)
	anonymous := func(uri string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/auth", nil)
		req.Header.Set("X-Forwarded-Uri", uri)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if a, b := anonymous("/aaaa/x"), anonymous("/bbbb/x"); a != http.StatusOK || b != http.StatusUnauthorized {
		t.Fatalf("before the reload: /aaaa %d, /bbbb %d; want 200, 401", a, b)
	}

	if err := os.WriteFile(cfg, rule("/bbbb"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(cfg, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // a watcher poll passes: it must not have reloaded
	if a := anonymous("/aaaa/x"); a != http.StatusOK {
		t.Fatalf("the watcher reloaded a file whose size and mtime did not change (/aaaa %d); the test cannot tell SIGHUP apart", a)
	}
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The new rules serve as soon as they are swapped in; the log line
	// follows the swap and reaches us through a pipe, so both are waited
	// for within one deadline.
	deadline := time.Now().Add(5 * time.Second)
	for anonymous("/bbbb/x") != http.StatusOK || !strings.Contains(c.stderr.String(), "configuration reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("SIGHUP did not reload the configuration and log it (/bbbb %d):\n%s", anonymous("/bbbb/x"), c.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a := anonymous("/aaaa/x"); a != http.StatusUnauthorized {
		t.Errorf("after the reload /aaaa answers %d, want 401", a)
	}
}
