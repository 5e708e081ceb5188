package gateway

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/testnet"
	"github.com/keygate/keygate/internal/verify"
)

// readmeHeaders are the claim headers of the README's configuration (the
// built-in one, whose dev issuer maps server.DefaultHeaders), the ones its
// proxy blocks name; the real-proxy fixture's issuers map them the same way.
var readmeHeaders = []verify.HeaderMapping{{Header: "X-Auth-Issuer", Claim: "iss"}, {Header: "X-Auth-Scopes", Claim: "scope"},
	{Header: "X-Auth-Subject", Claim: "sub"}}

// The addresses in the README's blocks, which the tests replace.
const readmeKeygate, readmeApp = "127.0.0.1:8080", "127.0.0.1:9000"

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

// spellings returns "name: value" lines for h in every spelling a client
// can give it: with '_' for any of its '-', each as written, in lower and
// in upper case.
func spellings(h, value string) []string {
	var out []string
	for _, n := range append([]string{h}, underscored(h)...) {
		for _, c := range []string{n, strings.ToLower(n), strings.ToUpper(n)} {
			out = append(out, c+": "+value)
		}
	}
	return out
}

// forwardingHeaders are every header a proxy or framework has been known
// to name the request's URI, method or host by (keygate reads the first
// five under one preset or another), with the value that would steer the
// decision to an anonymous rule.
var forwardingHeaders = [][2]string{
	{"X-Forwarded-Uri", "/public/x"}, {"X-Original-URI", "/public/x"}, {"X-Forwarded-Method", "GET"},
	{"X-Original-Method", "GET"}, {"X-Forwarded-Host", "public.example"},
	{"X-Original-URL", "http://public.example/public/x"}, {"X-Rewrite-URL", "/public/x"}, {"X-Forwarded-Path", "/public/x"},
	{"X-Forwarded-Prefix", "/public"}, {"X-Envoy-Original-Path", "/public/x"}, {"X-HTTP-Method-Override", "GET"},
	{"X-HTTP-Method", "GET"}, {"X-Method-Override", "GET"}, {"Forwarded", "host=public.example;proto=https"},
	{"X-Forwarded-Server", "public.example"}, {"X-Host", "public.example"}, {"X-Forwarded-Proto", "https"},
	{"X-Forwarded-Port", "443"}, {"X-Forwarded-For", "10.0.0.1"}, {"X-Real-IP", "10.0.0.1"},
}

// echo is what the test app answers: the request line it got, the README's
// claim headers (values of repeats joined by "|"), then every other
// spelling of a claim header that arrived.
func echo(method, path, issuer, scopes, subject string) string {
	return fmt.Sprintf("%s %s issuer=%s scopes=%s subject=%s", method, path, issuer, scopes, subject)
}

// forgeries returns the cases: every forwarding header keygate has ever
// read (and their case and underscore variants, and repeats), and every
// claim header the README's blocks copy, forged in every spelling.
func forgeries(good string) []forgery {
	var claims, forwarding []string
	for _, h := range readmeHeaders {
		claims = append(claims, spellings(h.Header, "forged-"+strings.ToLower(h.Header))...)
	}
	for _, h := range forwardingHeaders {
		forwarding = append(forwarding, spellings(h[0], h[1])...)
	}
	alice := echo("GET", "/orders", issA, "read write", "alice")
	return []forgery{
		{name: "valid token reaches the app with its claims", method: "GET", path: "/orders", token: good, status: 200, body: alice},
		{name: "every claim header forged in every spelling is replaced", method: "GET", path: "/orders", token: good,
			headers: claims, status: 200, body: alice},
		{name: "every claim header forged in every spelling is removed on an anonymous path", method: "GET", path: "/public/x",
			headers: claims, status: 200, body: echo("GET", "/public/x", "", "", "")},
		// The security review's reproduction.
		{name: "X-Auth-Issuer and X-Auth-Scopes forged on an anonymous path", method: "GET", path: "/public/x",
			headers: []string{"X-Auth-Issuer: evil", "X-Auth-Scopes: admin"}, status: 200, body: echo("GET", "/public/x", "", "", "")},
		{name: "repeated forged claim headers are removed", method: "GET", path: "/public/x",
			headers: []string{"X-Auth-Scopes: admin", "X-Auth-Scopes: root", "X-Auth-Issuer: a", "x-auth-issuer: b"}, status: 200,
			body: echo("GET", "/public/x", "", "", "")},
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
			body: echo("GET", "/reports/1", "", "", "")},
		{name: "X-Forwarded-Host to the public host", method: "GET", host: "api.example", path: "/admin/users",
			headers: []string{"X-Forwarded-Host: public.example"}, status: 401},
		{name: "X-Forwarded-Host repeated", method: "GET", host: "api.example", path: "/admin/users",
			headers: []string{"X-Forwarded-Host: public.example", "X-Forwarded-Host: public.example"}, status: 401},
		{name: "Forwarded host and X-Forwarded-Server", method: "GET", host: "api.example", path: "/admin/users",
			headers: []string{"Forwarded: host=public.example", "X-Forwarded-Server: public.example", "X-Host: public.example"}, status: 401},
		{name: "the public host itself", method: "GET", host: "public.example", path: "/admin/users", status: 200,
			body: echo("GET", "/admin/users", "", "", "")},
		{name: "every forwarding header at once", method: "DELETE", host: "api.example", path: "/admin/users",
			headers: []string{"X-Forwarded-Uri: /public/x", "X-Original-URI: /public/x", "X-Forwarded-Method: GET",
				"X-Original-Method: GET", "X-Forwarded-Host: public.example"}, status: 401},
		{name: "every forwarding header in every spelling", method: "DELETE", host: "api.example", path: "/admin/users",
			headers: forwarding, status: 401},
		{name: "every forwarding header in every spelling with a token lacking the scope", method: "DELETE", host: "api.example",
			path: "/admin/users", token: good, headers: forwarding, status: 403},
		{name: "every forwarding and claim header in every spelling with a token", method: "GET", host: "api.example",
			path: "/orders", token: good, headers: slices.Concat(forwarding, claims), status: 200, body: alice},
	}
}

// realProxy is a proxy the forged-header tests run for real, configured
// with exactly the README's block for it.
type realProxy struct {
	name    string
	binary  func(t *testing.T) string // skips, or fails under KEYGATE_REQUIRE_*, when it is missing
	snippet func(Snippet) (string, error)
	fence   string // the README's code block: "```" fence + its first line
	start   func(t *testing.T, bin, snippet string) string
	// conflicts are the forgeries that, behind the auto preset, disagree
	// with the forwarding headers this proxy sets: keygate refuses them
	// with 401 invalid_request.
	conflicts []string
}

var realProxies = []realProxy{
	{name: ProxyNginx, binary: testnet.NginxBinary, snippet: Snippet.Nginx, start: testnet.StartNginx,
		fence: "```nginx\n# keygate forward-auth for nginx", conflicts: []string{
			"X-Forwarded-Uri to an anonymous path", "X-Forwarded-Uri lower case", "X-Forwarded-Uri repeated",
			"X-Forwarded-Uri with a token lacking the scope", "X-Forwarded-Method to the anonymous GET route",
			"every forwarding header at once", "every forwarding header in every spelling with a token lacking the scope",
			"every forwarding and claim header in every spelling with a token"}},
	{name: ProxyCaddy, binary: testnet.CaddyBinary, snippet: Snippet.Caddy, start: testnet.StartCaddy,
		fence: "```caddyfile\n# keygate forward-auth for Caddy", conflicts: []string{
			"X-Original-URI to an anonymous path", "X-Original-Method to the anonymous GET route", "every forwarding header at once",
			"every forwarding header in every spelling with a token lacking the scope",
			"every forwarding and claim header in every spelling with a token"}},
	{name: ProxyTraefik, binary: testnet.TraefikBinary, snippet: Snippet.Traefik, start: testnet.StartTraefik,
		fence: "```yaml\n# keygate forward-auth for Traefik", conflicts: []string{
			"X-Original-URI to an anonymous path", "X-Original-Method to the anonymous GET route", "every forwarding header at once",
			"every forwarding header in every spelling with a token lacking the scope",
			"every forwarding and claim header in every spelling with a token"}},
}

// readmeBlock returns the README's block for p, with the two addresses in
// it replaced by keygate's and the app's. The block must be what Snippet
// prints for the README's configuration (and TestREADMEProxySnippets checks
// that `keygate config` prints it), so the proxy runs exactly that.
func (p realProxy) readmeBlock(t *testing.T, keygate, app string) string {
	t.Helper()
	readme, err := os.ReadFile("../../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), p.fence)
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatalf("docs/gateway.md has no block opening with %q", p.fence)
	}
	block = p.fence[strings.IndexByte(p.fence, '\n')+1:] + block
	var names []string
	for _, h := range readmeHeaders {
		names = append(names, h.Header)
	}
	want, err := p.snippet(Snippet{Keygate: readmeKeygate, App: readmeApp, Headers: names})
	if err != nil {
		t.Fatal(err)
	}
	if block != want {
		t.Fatalf("docs/gateway.md's %s block is not what keygate config prints for its configuration:\n%s\nwant:\n%s", p.name, block, want)
	}
	if strings.Count(block, readmeKeygate) != 1 || strings.Count(block, readmeApp) != 1 {
		t.Fatalf("docs/gateway.md's %s block names %s and %s other than once each", p.name, readmeKeygate, readmeApp)
	}
	return strings.NewReplacer(readmeKeygate, keygate, readmeApp, app).Replace(block)
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
// the app with the README's block for it.
func (p realProxy) starter(bin string) func(t *testing.T, keygate, app string) string {
	return func(t *testing.T, keygate, app string) string {
		return p.start(t, bin, p.readmeBlock(t, keygate, app))
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
			}, p.cleaned)
		})
	}
}

// cleansPath is, for a proxy that cleans a request's path before it asks
// keygate and forwards it (Traefik does, as path.Clean does), the path both
// get; "" for a proxy that passes the path on as sent.
func cleansPath(proxy, p string) string {
	if proxy != ProxyTraefik {
		return ""
	}
	return path.Clean(p)
}

// cleaned adjusts an ambiguous-path case to a proxy that cleans paths:
// keygate then decides on the clean path, which is also the one the app
// gets, so the request is allowed or refused as that path is, and the app
// must have seen exactly it (a mismatch would be the hole).
func (p realProxy) cleaned(c *forgery) {
	clean := cleansPath(p.name, c.path)
	if clean == "" || clean == c.path || c.status != http.StatusForbidden {
		return
	}
	switch {
	case strings.HasPrefix(strings.ToLower(clean), "/admin/") || strings.EqualFold(clean, "/admin"):
		c.status, c.body = http.StatusUnauthorized, "" // the admin rule, and no token
	default:
		c.status, c.body = http.StatusOK, echo(c.method, clean, "", "", "")
	}
}

// runForgeries starts keygate's forward-auth behind fwd and an app that
// echoes what it received, lets start put the proxy in front, and sends
// every case through it. adjust, if set, changes a case's expectation.
func runForgeries(t *testing.T, routes []Route, fwd Forwarding, start func(t *testing.T, keygate, app string) string,
	cases func(*fixture) []forgery, adjust func(*forgery)) {
	f := newREADMEFixture(t, routes, fwd)
	keygate := httptest.NewServer(f.handler)
	defer keygate.Close()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header
		io.WriteString(w, echo(r.Method, r.URL.Path, strings.Join(h.Values("X-Auth-Issuer"), "|"),
			strings.Join(h.Values("X-Auth-Scopes"), "|"), strings.Join(h.Values("X-Auth-Subject"), "|")))
		for _, k := range slices.Sorted(maps.Keys(h)) {
			for _, c := range readmeHeaders {
				if k != c.Header && sameHeader(k, c.Header) {
					fmt.Fprintf(w, " smuggled %s=%s", k, strings.Join(h[k], "|"))
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
	host := c.host
	if host == "" {
		host = "localhost"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", c.method, c.path, host)
	if c.token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", c.token)
	}
	for _, h := range c.headers {
		b.WriteString(h + "\r\n")
	}
	status, _, body := testnet.Exchange(t, addr, b.String())
	return status, body
}

// TestNginxAuthRequest checks the answers nginx passes on: the challenge on
// 401, and that an oversized token (up to the header limit nginx and keygate
// allow) gets keygate's 401 rather than nginx's 500.
func TestNginxAuthRequest(t *testing.T) {
	bin := testnet.NginxBinary(t)
	nginxPreset, _ := Preset(ProxyNginx)
	f := newREADMEFixture(t, proxyRoutes, nginxPreset)
	keygate := httptest.NewServer(f.handler)
	defer keygate.Close()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app") }))
	defer app.Close()
	addr := testnet.StartNginx(t, bin, realProxies[0].readmeBlock(t, strings.TrimPrefix(keygate.URL, "http://"), strings.TrimPrefix(app.URL, "http://")))
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
