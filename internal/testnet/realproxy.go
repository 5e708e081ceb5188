package testnet

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Real proxies
//
// The forward-auth tests put the real nginx, Caddy and Traefik in front of
// keygate. Each binary is found on PATH (Traefik also at
// $KEYGATE_TRAEFIK_BIN), or the test skips; with KEYGATE_REQUIRE_NGINX,
// KEYGATE_REQUIRE_CADDY or KEYGATE_REQUIRE_TRAEFIK set (as CI sets the
// first two) it fails instead. Under -short (go test -short, which CI
// never passes) the test skips whatever is installed.

// ProxyBinary finds a proxy's binary on PATH or at fallback, or skips the
// test; with requireEnv set in the environment (as .ci/run sets it) it
// fails instead, so that CI cannot skip a real-proxy test.
func ProxyBinary(t *testing.T, name, fallback, requireEnv, pkg string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("integration: the real %s; run without -short", name)
	}
	if bin, err := exec.LookPath(name); err == nil {
		return bin
	}
	if fallback != "" {
		if _, err := os.Stat(fallback); err == nil {
			return fallback
		}
	}
	if os.Getenv(requireEnv) != "" {
		t.Fatalf("%s is required (%s is set) but not installed", name, requireEnv)
	}
	t.Skipf("%s not installed; apt-get install %s, or run .ci/run", name, pkg)
	return ""
}

func NginxBinary(t *testing.T) string {
	return ProxyBinary(t, "nginx", "/usr/sbin/nginx", "KEYGATE_REQUIRE_NGINX", "nginx-light")
}

func CaddyBinary(t *testing.T) string {
	return ProxyBinary(t, "caddy", "", "KEYGATE_REQUIRE_CADDY", "caddy")
}

// TraefikBinary is Traefik from PATH or $KEYGATE_TRAEFIK_BIN. Debian has no
// package of it; scripts/integration-traefik.sh builds it from its Go
// module and runs the real-proxy tests with it.
func TraefikBinary(t *testing.T) string {
	return ProxyBinary(t, "traefik", os.Getenv("KEYGATE_TRAEFIK_BIN"), "KEYGATE_REQUIRE_TRAEFIK", "traefik (scripts/integration-traefik.sh builds one)")
}

// RunProxy writes conf into dir/confName, starts the proxy from args (in
// which %CONF% stands for that file) in the foreground with its output in
// dir/proxy.log, and waits for addr. When the test ends the proxy gets
// SIGTERM, which lets nginx's master stop its workers (SIGKILL would orphan
// them), and on failure its configuration and log are shown.
func RunProxy(t *testing.T, bin, dir, confName, conf, addr string, args ...string) {
	t.Helper()
	confPath := filepath.Join(dir, confName)
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "%CONF%", confPath)
	}
	logPath := filepath.Join(dir, "proxy.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("%s:\n%s\nlog:\n%s", confName, conf, log)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("%s did not start listening on %s within 10s", filepath.Base(bin), addr)
}

// StartNginx runs nginx with snippet as the locations of its one server,
// on a free loopback port, and returns that address.
func StartNginx(t *testing.T, bin, snippet string) string {
	t.Helper()
	dir, addr := t.TempDir(), ClosedAddr(t)
	conf := fmt.Sprintf(`
pid %[1]s/nginx.pid;
error_log stderr warn;
worker_processes 1;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  large_client_header_buffers 4 64k;
  server {
    # Off by default, and nginx then drops every header with an
    # underscore: the blocks must hold without that help.
    underscores_in_headers on;
    listen %[2]s;
%[3]s
  }
}
`, dir, addr, snippet)
	RunProxy(t, bin, dir, "nginx.conf", conf, addr, "-p", dir, "-c", "%CONF%", "-e", "stderr", "-g", "daemon off;")
	return addr
}

// StartTraefik runs Traefik with snippet as its dynamic configuration (the
// file provider), one plain HTTP entry point on a free loopback port, no
// API, dashboard or telemetry, and returns that address.
func StartTraefik(t *testing.T, bin, snippet string) string {
	t.Helper()
	dir, addr := t.TempDir(), ClosedAddr(t)
	RunProxy(t, bin, dir, "dynamic.yaml", snippet, addr, "--entrypoints.web.address="+addr, "--providers.file.filename=%CONF%",
		"--log.level=ERROR", "--global.checknewversion=false", "--global.sendanonymoususage=false")
	// The entry point listens before the file provider's routers are in:
	// until then Traefik answers 404 itself.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("traefik did not load its routers within 10s (last: %v)", err)
		}
	}
	return addr
}

// StartCaddy runs Caddy with snippet as the directives of its one site,
// plain HTTP for any host name on a free loopback port, with no admin
// endpoint and its state in a temporary directory, and returns that address.
func StartCaddy(t *testing.T, bin, snippet string) string {
	t.Helper()
	dir, addr := t.TempDir(), ClosedAddr(t)
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
	RunProxy(t, bin, dir, "Caddyfile", conf, addr, "run", "--config", "%CONF%", "--adapter", "caddyfile")
	return addr
}
