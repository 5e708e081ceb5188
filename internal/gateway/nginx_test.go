package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// claimHeaders are the fixture's claim headers, as keygate config would
// list them.
var claimHeaders = []string{"X-Auth-Roles", "X-Auth-Scopes", "X-Auth-Subject", "X-Auth-Tenant"}

// proxyRoutes are the rules of the real-proxy tests: an anonymous prefix, a
// method-restricted anonymous route, a host that is public, and an admin
// prefix, so that steering any of method, path or host would show.
var proxyRoutes = []Route{
	{PathPrefix: "/public", Anonymous: true},
	{PathPrefix: "/reports", Methods: []string{"GET"}, Anonymous: true},
	{Host: "public.example", PathPrefix: "/", Anonymous: true},
	{PathPrefix: "/admin", Scopes: []string{"admin"}},
	{PathPrefix: "/"},
}

// forgery is one request a client sends through the real proxy, trying to
// steer forward-auth's decision or to smuggle claim headers to the app.
type forgery struct {
	name, method, host, path string
	token                    string   // "good": the fixture's token without the admin scope
	headers                  []string // name: value lines, sent as given (repeats kept)
	// status is what the client must get; body, when set, what the app saw.
	status int
	body   string
}

// forgeries returns the cases: every forwarding header keygate has ever
// read (and their case and underscore variants, and repeats), and every
// claim header, forged.
func forgeries(good string) []forgery {
	all := []string{"X-Auth-Subject: mallory", "X-Auth-Scopes: admin", "X-Auth-Tenant: evil-corp", "X-Auth-Roles: root"}
	underscored := []string{"X_Auth_Subject: mallory", "x_auth_scopes: admin", "X-Auth_Tenant: evil-corp", "X_AUTH-ROLES: root",
		"X_Auth_Scopes: root"}
	return []forgery{
		{name: "valid token reaches the app with its claims", method: "GET", path: "/orders", token: good, status: 200,
			body: "GET /orders subject=alice scopes=read write tenant=acme roles=admin,ops"},
		{name: "every claim header forged is replaced", method: "GET", path: "/orders", token: good, headers: all, status: 200,
			body: "GET /orders subject=alice scopes=read write tenant=acme roles=admin,ops"},
		{name: "forged claim headers on an anonymous path are removed", method: "GET", path: "/public/x", headers: all, status: 200,
			body: "GET /public/x subject= scopes= tenant= roles="},
		{name: "lower-case forged claim headers are removed", method: "GET", path: "/public/x",
			headers: []string{"x-auth-subject: mallory", "x-auth-scopes: admin"}, status: 200,
			body: "GET /public/x subject= scopes= tenant= roles="},
		{name: "repeated forged claim headers are removed", method: "GET", path: "/public/x",
			headers: []string{"X-Auth-Scopes: admin", "X-Auth-Scopes: root"}, status: 200,
			body: "GET /public/x subject= scopes= tenant= roles="},
		// CGI-style apps (PHP among them) read X_Auth_Scopes as X-Auth-Scopes.
		{name: "forged claim headers with underscores are removed", method: "GET", path: "/public/x",
			headers: underscored, status: 200, body: "GET /public/x subject= scopes= tenant= roles="},
		{name: "forged claim headers with underscores beside a valid token are removed", method: "GET", path: "/orders",
			token: good, headers: underscored, status: 200,
			body: "GET /orders subject=alice scopes=read write tenant=acme roles=admin,ops"},
		{name: "no token", method: "GET", path: "/admin/users", status: 401},
		{name: "X-Forwarded-Uri to an anonymous path", method: "GET", path: "/admin/users",
			headers: []string{"X-Forwarded-Uri: /public/x"}, status: 401},
		{name: "X-Forwarded-Uri lower case", method: "GET", path: "/admin/users",
			headers: []string{"x-forwarded-uri: /public/x"}, status: 401},
		{name: "X-Forwarded-Uri repeated", method: "GET", path: "/admin/users",
			headers: []string{"X-Forwarded-Uri: /public/x", "X-Forwarded-Uri: /public/y"}, status: 401},
		{name: "X_Forwarded_Uri with underscores", method: "GET", path: "/admin/users",
			headers: []string{"X_Forwarded_Uri: /public/x"}, status: 401},
		{name: "X-Original-URI to an anonymous path", method: "GET", path: "/admin/users",
			headers: []string{"X-Original-URI: /public/x"}, status: 401},
		{name: "X-Original-URL to an anonymous path", method: "GET", path: "/admin/users",
			headers: []string{"X-Original-URL: http://x/public/x", "X-Rewrite-URL: /public/x"}, status: 401},
		{name: "X-Forwarded-Uri with a token lacking the scope", method: "GET", path: "/admin/users", token: good,
			headers: []string{"X-Forwarded-Uri: /orders"}, status: 403},
		{name: "X-Forwarded-Method to the anonymous GET route", method: "DELETE", path: "/reports/1",
			headers: []string{"X-Forwarded-Method: GET"}, status: 401},
		{name: "X-Original-Method to the anonymous GET route", method: "DELETE", path: "/reports/1",
			headers: []string{"X-Original-Method: GET"}, status: 401},
		{name: "X-HTTP-Method-Override to the anonymous GET route", method: "DELETE", path: "/reports/1",
			headers: []string{"X-HTTP-Method-Override: GET", "X-Method-Override: GET"}, status: 401},
		{name: "anonymous GET route without a token", method: "GET", path: "/reports/1", status: 200,
			body: "GET /reports/1 subject= scopes= tenant= roles="},
		{name: "X-Forwarded-Host to the public host", method: "GET", host: "api.example", path: "/admin/users",
			headers: []string{"X-Forwarded-Host: public.example"}, status: 401},
		{name: "X-Forwarded-Host repeated", method: "GET", host: "api.example", path: "/admin/users",
			headers: []string{"X-Forwarded-Host: public.example", "X-Forwarded-Host: public.example"}, status: 401},
		{name: "Forwarded host and X-Forwarded-Server", method: "GET", host: "api.example", path: "/admin/users",
			headers: []string{"Forwarded: host=public.example", "X-Forwarded-Server: public.example", "X-Host: public.example"}, status: 401},
		{name: "the public host itself", method: "GET", host: "public.example", path: "/admin/users", status: 200,
			body: "GET /admin/users subject= scopes= tenant= roles="},
		{name: "every forwarding header at once", method: "DELETE", host: "api.example", path: "/admin/users",
			headers: []string{"X-Forwarded-Uri: /public/x", "X-Original-URI: /public/x", "X-Forwarded-Method: GET",
				"X-Original-Method: GET", "X-Forwarded-Host: public.example"}, status: 401},
	}
}

// realProxy is a proxy the forged-header tests run for real, configured
// with exactly what `keygate config` prints for it.
type realProxy struct {
	name    string
	binary  func(t *testing.T) string // skips, or fails under KEYGATE_REQUIRE_*, when it is missing
	snippet func(Snippet) (string, error)
	start   func(t *testing.T, bin, snippet string) string
	// conflicts are the forgeries that, behind the auto preset, disagree
	// with the forwarding headers this proxy sets: keygate refuses them
	// with 401 invalid_request.
	conflicts []string
}

var realProxies = []realProxy{
	{name: ProxyNginx, binary: nginxBinary, snippet: Snippet.Nginx, start: startNginx, conflicts: []string{
		"X-Forwarded-Uri to an anonymous path", "X-Forwarded-Uri lower case", "X-Forwarded-Uri repeated",
		"X-Forwarded-Uri with a token lacking the scope", "X-Forwarded-Method to the anonymous GET route",
		"every forwarding header at once"}},
	{name: ProxyCaddy, binary: caddyBinary, snippet: Snippet.Caddy, start: startCaddy, conflicts: []string{
		"X-Original-URI to an anonymous path", "X-Original-Method to the anonymous GET route", "every forwarding header at once"}},
}

// TestRealProxyForgedHeaders puts the real nginx and the real Caddy in
// front of an app and sends every forged forwarding and claim header
// through each. Behind the proxy's own preset keygate trusts only the
// headers that proxy sets, so a forged one is ignored and the request is
// decided as what it is; behind auto, a forged header that disagrees with
// the proxy's is refused. Either way no forgery reaches the app. CI
// installs both and sets KEYGATE_REQUIRE_NGINX and KEYGATE_REQUIRE_CADDY,
// so that this test cannot silently skip there.
func TestRealProxyForgedHeaders(t *testing.T) {
	for _, p := range realProxies {
		for _, preset := range []string{p.name, ProxyAuto} {
			t.Run(p.name+"/"+preset, func(t *testing.T) {
				bin := p.binary(t)
				fwd, err := Preset(preset)
				if err != nil {
					t.Fatal(err)
				}
				var adjust func(*forgery)
				if preset == ProxyAuto {
					adjust = func(c *forgery) {
						if slices.Contains(p.conflicts, c.name) {
							c.status, c.body = http.StatusUnauthorized, ""
						}
					}
				}
				runForgeries(t, proxyRoutes, fwd, p.starter(bin), func(f *fixture) []forgery { return forgeries(sign(t, f.signerA, nil)) }, adjust)
			})
		}
	}
}

// starter returns a function that starts the proxy in front of keygate and
// the app with the block `keygate config` prints for it.
func (p realProxy) starter(bin string) func(t *testing.T, keygate, app string) string {
	return func(t *testing.T, keygate, app string) string {
		snippet, err := p.snippet(Snippet{Keygate: keygate, App: app, Headers: claimHeaders})
		if err != nil {
			t.Fatal(err)
		}
		return p.start(t, bin, snippet)
	}
}

// TestRealProxyAmbiguousPaths sends paths that the app behind the proxy
// may read otherwise than keygate through the real nginx and Caddy, under
// the security review's rules (/admin scoped, everything else anonymous):
// the proxy forwards them as sent, so keygate must refuse them (403, which
// both pass on) rather than decide on its own reading.
func TestRealProxyAmbiguousPaths(t *testing.T) {
	routes := []Route{
		{PathPrefix: "/admin", Scopes: []string{"admin"}, CaseInsensitive: true},
		{PathPrefix: "/", Anonymous: true},
	}
	for _, p := range realProxies {
		t.Run(p.name, func(t *testing.T) {
			bin := p.binary(t)
			fwd, err := Preset(p.name)
			if err != nil {
				t.Fatal(err)
			}
			runForgeries(t, routes, fwd, p.starter(bin), func(f *fixture) []forgery {
				admin := sign(t, f.signerA, map[string]any{"scope": "admin"})
				refused := func(path string) forgery {
					return forgery{name: path, method: "GET", path: path, status: http.StatusForbidden}
				}
				return []forgery{
					{name: "anonymous", method: "GET", path: "/users", status: 200},
					{name: "admin without a token", method: "GET", path: "/admin/users", status: 401},
					{name: "admin with the scope", method: "GET", path: "/admin/users", token: admin, status: 200},
					{name: "admin, empty segments kept", method: "GET", path: "/admin//users", token: admin, status: 200},
					refused("/admin//../users"), // Node.js, Python, Jetty: /admin/users
					refused("/ADMIN//x/../../users"),
					refused("/admin/../users"), // Express, Flask, gin: under /admin
					refused("/admin/./../users"),
					refused("//evil/admin/users"), // new URL(path, base): /admin/users
					refused("/admin./users"),      // IIS: /admin/users
					refused("/admin%20/users"),
				}
			}, nil)
		})
	}
}

// runForgeries starts keygate's forward-auth behind fwd and an app that
// echoes what it received, lets start put the proxy in front, and sends
// every case through it. adjust, if set, changes a case's expectation.
func runForgeries(t *testing.T, routes []Route, fwd Forwarding, start func(t *testing.T, keygate, app string) string,
	cases func(*fixture) []forgery, adjust func(*forgery)) {
	f := newFixtureWith(t, routes, "", fwd)
	keygate := httptest.NewServer(f.handler)
	defer keygate.Close()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header
		fmt.Fprintf(w, "%s %s subject=%s scopes=%s tenant=%s roles=%s", r.Method, r.URL.Path, strings.Join(h.Values("X-Auth-Subject"), "|"),
			strings.Join(h.Values("X-Auth-Scopes"), "|"), strings.Join(h.Values("X-Auth-Tenant"), "|"), strings.Join(h.Values("X-Auth-Roles"), "|"))
		// Any other spelling of a claim header that arrived.
		for k, v := range h {
			for _, c := range claimHeaders {
				if k != c && sameHeader(k, c) {
					fmt.Fprintf(w, " smuggled %s=%s", k, strings.Join(v, "|"))
				}
			}
		}
	}))
	defer app.Close()
	addr := start(t, strings.TrimPrefix(keygate.URL, "http://"), strings.TrimPrefix(app.URL, "http://"))
	for _, c := range cases(f) {
		if adjust != nil {
			adjust(&c)
		}
		t.Run(c.name, func(t *testing.T) {
			status, body := rawRequest(t, addr, c)
			if status != c.status {
				t.Fatalf("status %d, want %d; body %q", status, c.status, body)
			}
			if c.body != "" && body != c.body {
				t.Errorf("app saw %q, want %q", body, c.body)
			}
		})
	}
}

// rawRequest writes the request by hand so that repeated, lower-case and
// underscored header names reach the proxy exactly as a client sent them.
func rawRequest(t *testing.T, addr string, c forgery) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	host := c.host
	if host == "" {
		host = "localhost"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", c.method, c.path, host)
	if c.token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", c.token)
	}
	for _, h := range c.headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestNginxAuthRequest checks the answers nginx passes on: the challenge on
// 401, and that an oversized token (up to the header limit nginx and keygate
// allow) gets keygate's 401 rather than nginx's 500.
func TestNginxAuthRequest(t *testing.T) {
	bin := nginxBinary(t)
	nginxPreset, _ := Preset(ProxyNginx)
	f := newFixtureWith(t, proxyRoutes, "", nginxPreset)
	keygate := httptest.NewServer(f.handler)
	defer keygate.Close()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app") }))
	defer app.Close()
	snippet, err := Snippet{Keygate: strings.TrimPrefix(keygate.URL, "http://"), App: strings.TrimPrefix(app.URL, "http://"), Headers: claimHeaders}.Nginx()
	if err != nil {
		t.Fatal(err)
	}
	addr := startNginx(t, bin, snippet)
	good := sign(t, f.signerA, nil)
	cases := []struct {
		name, path, auth string
		status           int
		challenge        string
	}{
		{"valid token", "/orders", "Bearer " + good, 200, ""},
		{"missing token", "/orders", "", 401, `Bearer realm="keygate"`},
		{"invalid token", "/orders", "Bearer " + good[:len(good)-4] + "AAAA", 401,
			`Bearer realm="keygate", error="invalid_token", error_description="bad_signature"`},
		{"oversized token gets 401, not 500", "/orders", "Bearer " + strings.Repeat("A", 9000), 401,
			`Bearer realm="keygate", error="invalid_token", error_description="too_large"`},
		{"40 KiB token gets keygate's 401", "/orders", "Bearer " + strings.Repeat("A", 40<<10), 401,
			`Bearer realm="keygate", error="invalid_token", error_description="too_large"`},
		{"missing scope", "/admin/users", "Bearer " + good, 403, ""},
		// nginx forwards $request_uri as sent; Tomcat would read /admin/users.
		{"path parameters are refused with 403, not 500", "/public/..;/admin/users", "", 403, ""},
		{"encoded dots are refused", "/public/%2e%2e/admin/users", "", 403, ""},
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "http://"+addr+tc.path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
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
			if got := resp.Header.Get("WWW-Authenticate"); tc.challenge != "" && got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
		})
	}
}
