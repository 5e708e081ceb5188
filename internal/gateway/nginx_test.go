package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNginxAuthRequest puts the real nginx in front of a test upstream, with
// auth_request asking keygate's forward-auth handler. CI installs nginx and
// sets KEYGATE_REQUIRE_NGINX=1 so that this test cannot silently skip there.
func TestNginxAuthRequest(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
		if _, serr := os.Stat(bin); serr != nil {
			if os.Getenv("KEYGATE_REQUIRE_NGINX") != "" {
				t.Fatal("nginx is required (KEYGATE_REQUIRE_NGINX is set) but not installed")
			}
			t.Skip("nginx not installed; apt-get install nginx-light, or run .ci/run")
		}
	}
	f := newFixture(t, []Route{
		{PathPrefix: "/public", Anonymous: true},
		{PathPrefix: "/admin", Scopes: []string{"admin"}},
		{PathPrefix: "/"},
	}, "")
	keygate := httptest.NewServer(f.handler)
	defer keygate.Close()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "subject=%s scopes=%s tenant=%s path=%s", r.Header.Get("X-Auth-Subject"),
			r.Header.Get("X-Auth-Scopes"), r.Header.Get("X-Auth-Tenant"), r.URL.Path)
	}))
	defer upstream.Close()

	addr := startNginx(t, bin, strings.TrimPrefix(keygate.URL, "http://"), strings.TrimPrefix(upstream.URL, "http://"))
	good := sign(t, f.signerA, nil)
	cases := []struct {
		name, path, auth string
		forged           bool
		status           int
		body, challenge  string
	}{
		{"valid token reaches upstream with claim headers", "/orders", "Bearer " + good, false, 200,
			"subject=alice scopes=read write tenant=acme path=/orders", ""},
		{"client-forged claim headers are overwritten", "/orders", "Bearer " + sign(t, f.signerA, map[string]any{"tenant": nil}), true, 200,
			"subject=alice scopes=read write tenant= path=/orders", ""},
		{"anonymous path needs no token", "/public/x", "", true, 200, "subject= scopes= tenant= path=/public/x", ""},
		{"missing token", "/orders", "", false, 401, "", `Bearer realm="keygate"`},
		{"invalid token", "/orders", "Bearer " + good[:len(good)-4] + "AAAA", false, 401, "",
			`Bearer realm="keygate", error="invalid_token", error_description="bad_signature"`},
		{"oversized token gets 401, not 500", "/orders", "Bearer " + strings.Repeat("A", 9000), false, 401, "",
			`Bearer realm="keygate", error="invalid_token", error_description="too_large"`},
		{"missing scope", "/admin/users", "Bearer " + good, false, 403, "", ""},
		// nginx forwards $request_uri as sent; Tomcat would read /admin/users.
		{"path parameters are refused with 403, not 500", "/public/..;/admin/users", "", false, 403, "", ""},
		{"encoded dots are refused", "/public/%2e%2e/admin/users", "", false, 403, "", ""},
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "http://"+addr+tc.path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if tc.forged {
				req.Header.Set("X-Auth-Subject", "mallory")
				req.Header.Set("X-Auth-Tenant", "evil-corp")
				req.Header.Set("X-Auth-Scopes", "admin")
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d; body %q", resp.StatusCode, tc.status, body)
			}
			if tc.body != "" && string(body) != tc.body {
				t.Errorf("upstream saw %q, want %q", body, tc.body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); tc.challenge != "" && got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
		})
	}
}

// startNginx writes a configuration into a temporary prefix, starts nginx in
// the foreground and waits for its port.
func startNginx(t *testing.T, bin, keygate, upstream string) string {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	conf := fmt.Sprintf(`
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
worker_processes 1;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  large_client_header_buffers 4 16k;
  upstream keygate { server %[3]s; }
  upstream app { server %[4]s; }
  server {
    listen %[2]s;
    location = /_keygate {
      internal;
      proxy_pass http://keygate/auth;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-URI $request_uri;
      proxy_set_header X-Original-Method $request_method;
      proxy_set_header X-Forwarded-Host $host;
    }
    location / {
      auth_request /_keygate;
      auth_request_set $kg_subject $upstream_http_x_auth_subject;
      auth_request_set $kg_scopes $upstream_http_x_auth_scopes;
      auth_request_set $kg_tenant $upstream_http_x_auth_tenant;
      proxy_set_header X-Auth-Subject $kg_subject;
      proxy_set_header X-Auth-Scopes $kg_scopes;
      proxy_set_header X-Auth-Tenant $kg_tenant;
      proxy_pass http://app;
    }
  }
}
`, dir, addr, keygate, upstream)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;")
	// SIGTERM lets the master stop its workers; SIGKILL would orphan them.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			if log, err := os.ReadFile(filepath.Join(dir, "error.log")); err == nil {
				t.Logf("nginx error.log:\n%s", log)
			}
		}
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
	}
	t.Fatal("nginx did not start listening within 10s")
	return ""
}
