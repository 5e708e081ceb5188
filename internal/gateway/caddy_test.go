package gateway

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestCaddyForgedHeaders puts the real Caddy (Debian's caddy package) in
// front of an app with exactly what `keygate config caddy` prints, and sends
// every forged forwarding and claim header through it, as the nginx test
// does. CI installs caddy and sets KEYGATE_REQUIRE_CADDY=1.
func TestCaddyForgedHeaders(t *testing.T) {
	bin := caddyBinary(t)
	caddyPreset, _ := Preset(ProxyCaddy)
	runForgeries(t, proxyRoutes, caddyPreset, func(t *testing.T, keygate, app string) string {
		snippet, err := Snippet{Keygate: keygate, App: app, Headers: claimHeaders}.Caddy()
		if err != nil {
			t.Fatal(err)
		}
		return startCaddy(t, bin, snippet)
	}, nil)
}

// TestCaddyForgedHeadersAuto is the same behind the default preset: Caddy
// overwrites X-Forwarded-Method/-Uri/-Host, and a forged X-Original-* copy
// that disagrees with them is refused with 401, which Caddy passes on.
func TestCaddyForgedHeadersAuto(t *testing.T) {
	bin := caddyBinary(t)
	auto, _ := Preset(ProxyAuto)
	refusedByConflict := map[string]bool{
		"X-Original-URI to an anonymous path": true, "X-Original-Method to the anonymous GET route": true,
		"every forwarding header at once": true,
	}
	runForgeries(t, proxyRoutes, auto, func(t *testing.T, keygate, app string) string {
		snippet, err := Snippet{Keygate: keygate, App: app, Headers: claimHeaders}.Caddy()
		if err != nil {
			t.Fatal(err)
		}
		return startCaddy(t, bin, snippet)
	}, func(c *forgery) {
		if refusedByConflict[c.name] {
			c.status, c.body = 401, ""
		}
	})
}

func caddyBinary(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("caddy")
	if err == nil {
		return bin
	}
	if os.Getenv("KEYGATE_REQUIRE_CADDY") != "" {
		t.Fatal("caddy is required (KEYGATE_REQUIRE_CADDY is set) but not installed")
	}
	t.Skip("caddy not installed; apt-get install caddy, or run .ci/run")
	return ""
}

// startCaddy runs Caddy in the foreground with snippet as the one site's
// directives, plain HTTP on a free port for any host name, no admin endpoint, and its
// state in a temporary directory.
func startCaddy(t *testing.T, bin, snippet string) string {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	conf := fmt.Sprintf(`{
	admin off
	auto_https off
	default_bind 127.0.0.1
	storage file_system %[1]s/data
}
http://:%[2]s {
%[3]s
}
`, dir, port, snippet)
	confPath := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "run", "--config", confPath, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	logf, err := os.Create(filepath.Join(dir, "caddy.log"))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			if log, err := os.ReadFile(filepath.Join(dir, "caddy.log")); err == nil {
				t.Logf("Caddyfile:\n%s\ncaddy log:\n%s", conf, log)
			}
		}
	})
	waitListening(t, addr, "caddy")
	return addr
}
