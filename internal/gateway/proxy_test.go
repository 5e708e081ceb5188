package gateway

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/testnet"
)

// upstreamEcho reports what reached it: path, claim headers and whether an
// Authorization header arrived.
func upstreamEcho() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream":
			fl := w.(http.Flusher)
			for i := range 3 {
				fmt.Fprintf(w, "chunk%d\n", i)
				fl.Flush()
				time.Sleep(20 * time.Millisecond)
			}
			return
		case "/ws":
			upgradeEcho(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s sub=%q tenant=%q scopes=%q host=%s body=%s under=%q uri=%s", r.Method, r.URL.Path,
			r.Header.Values("X-Auth-Subject"), r.Header.Values("X-Auth-Tenant"), r.Header.Values("X-Auth-Scopes"),
			r.Host, body, r.Header.Values("X_auth_subject"), r.RequestURI)
	}))
}

// upgradeEcho answers a WebSocket-style upgrade and echoes one line.
func upgradeEcho(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != "websocket" {
		http.Error(w, "want upgrade", 400)
		return
	}
	conn, rw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	rw.Flush()
	line, _ := rw.ReadString('\n')
	rw.WriteString("echo:" + line)
	rw.Flush()
}

func newProxy(t *testing.T, f *fixture, upstream string) *httptest.Server {
	t.Helper()
	return newProxyRoutes(t, f, []Route{
		{PathPrefix: "/public", Anonymous: true, Upstream: upstream},
		{PathPrefix: "/admin", Scopes: []string{"admin"}, Upstream: upstream},
		{PathPrefix: "/", Upstream: upstream},
	})
}

func newProxyRoutes(t *testing.T, f *fixture, routes []Route) *httptest.Server {
	t.Helper()
	p, err := NewProxy(ProxyConfig{
		Verifier: f.handler.verifier,
		Routes:   routes,
		Headers:  []string{"X-Auth-Subject", "X-Auth-Tenant", "X-Auth-Scopes"},
		Metrics:  telemetry.New().Decisions(telemetry.FrontProxy, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv
}

func TestProxy(t *testing.T) {
	f := newFixture(t, nil, "")
	up := upstreamEcho()
	defer up.Close()
	px := newProxy(t, f, up.URL)
	good := sign(t, f.signerA, map[string]any{"tenant": nil})
	cases := []struct {
		name, method, path, auth, body string
		forge                          bool
		status                         int
		want                           string // substring of the upstream's echo, or of the error body
	}{
		{"claims injected, forged copies stripped", "GET", "/orders", good, "", true, 200,
			`GET /orders sub=["alice"] tenant=[""] scopes=["read write"]`},
		{"body streamed through", "POST", "/orders", good, "payload-123", false, 200, "body=payload-123"},
		{"anonymous route: forged headers replaced by empty ones", "GET", "/public/a", "", "", true, 200,
			`sub=[""] tenant=[""] scopes=[""]`},
		{"missing token", "GET", "/orders", "", "", false, 401, "unauthorized"},
		{"bad token", "GET", "/orders", good + "x", "", false, 401, "invalid_token"},
		{"missing scope", "GET", "/admin/x", good, "", false, 403, "insufficient_scope"},
		{"the upstream sees the host the client asked for", "GET", "/h", good, "", false, 200, "host=" + strings.TrimPrefix(px.URL, "http://") + " "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, px.URL+tc.path, strings.NewReader(tc.body))
			if tc.auth != "" {
				req.Header.Set("Authorization", "Bearer "+tc.auth)
			}
			if tc.forge {
				req.Header.Set("X-Auth-Subject", "mallory")
				req.Header.Add("X-Auth-Tenant", "evil")
				req.Header.Set("x-auth-scopes", "admin")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) {
				t.Fatalf("got %d %q, want %d containing %q", resp.StatusCode, b, tc.status, tc.want)
			}
		})
	}
}

// TestProxyClaimHeadersSurviveConnection: a client naming the claim headers
// in Connection (which makes them hop-by-hop) must not strip them from what
// the upstream receives, and no client-sent copy in any spelling (case, or
// underscores that CGI-style upstreams read as dashes) may reach it.
func TestProxyClaimHeadersSurviveConnection(t *testing.T) {
	f := newFixture(t, nil, "")
	up := upstreamEcho()
	defer up.Close()
	px := newProxy(t, f, up.URL)
	good := sign(t, f.signerA, map[string]any{"tenant": nil})
	for _, tc := range []struct {
		name, path, auth, connection string
		want                         string
	}{
		{"token route", "/orders", good, "X-Auth-Subject", `sub=["alice"] tenant=[""] scopes=["read write"]`},
		{"token route, lower case, several", "/orders", good, "x-auth-subject, X-AUTH-TENANT, keep-alive, x-auth-scopes",
			`sub=["alice"] tenant=[""] scopes=["read write"]`},
		{"anonymous route", "/public/a", "", "X-Auth-Subject, X-Auth-Tenant", `sub=[""] tenant=[""] scopes=[""]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", px.URL+tc.path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", "Bearer "+tc.auth)
			}
			req.Header.Set("Connection", tc.connection)
			req.Header["x-auth-subject"] = []string{"mallory"} // sent as is, not canonicalised
			req.Header["X_Auth_Subject"] = []string{"mallory"}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), tc.want) || !strings.Contains(string(b), `under=[]`) {
				t.Fatalf("got %d %q, want 200 containing %q and under=[]", resp.StatusCode, b, tc.want)
			}
		})
	}
}

func TestProxyStreamingAndUpgrade(t *testing.T) {
	f := newFixture(t, nil, "")
	up := upstreamEcho()
	defer up.Close()
	px := newProxy(t, f, up.URL)
	good := sign(t, f.signerA, nil)

	// Streaming: the first chunk arrives before the upstream has finished.
	req, _ := http.NewRequest("GET", px.URL+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+good)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	start := time.Now()
	first, _ := br.ReadString('\n')
	if first != "chunk0\n" || time.Since(start) > 40*time.Millisecond {
		t.Errorf("first chunk %q after %v: not streamed", first, time.Since(start))
	}
	rest, _ := io.ReadAll(br)
	resp.Body.Close()
	if string(rest) != "chunk1\nchunk2\n" {
		t.Errorf("rest %q", rest)
	}

	// Upgrade: a raw connection speaks through the proxy after 101.
	conn, err := net.Dial("tcp", strings.TrimPrefix(px.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", good)
	cr := bufio.NewReader(conn)
	status, _ := cr.ReadString('\n')
	if !strings.Contains(status, "101") {
		t.Fatalf("upgrade answered %q", status)
	}
	for {
		l, err := cr.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	fmt.Fprintf(conn, "hello\n")
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if got, _ := cr.ReadString('\n'); got != "echo:hello\n" {
		t.Errorf("through the upgraded connection: %q", got)
	}

	// Upgrade without a token is refused before reaching the upstream.
	req, _ = http.NewRequest("GET", px.URL+"/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("tokenless upgrade: %d", resp.StatusCode)
	}
}

// upgradeAny accepts an upgrade to whatever protocol is asked for, the way
// an application handler for a custom protocol does, and echoes one line;
// a request without one is answered "plain" with what it saw.
func upgradeAny(w http.ResponseWriter, r *http.Request) {
	proto := r.Header.Get("Upgrade")
	if proto == "" {
		fmt.Fprintf(w, "plain %s connection=%q settings=%q", r.Proto, r.Header.Values("Connection"), r.Header.Values("Http2-Settings"))
		return
	}
	conn, rw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + proto + "\r\nConnection: Upgrade\r\n\r\n")
	rw.Flush()
	line, _ := rw.ReadString('\n')
	rw.WriteString("echo:" + line)
	rw.Flush()
}

// rawUpgrade sends an upgrade request on a new connection to the proxy at
// addr and returns the status line, and what the upgraded connection echoes
// to "hello" (or the response body when there was no 101).
func rawUpgrade(t *testing.T, addr, token, connection, upgrade, extra string) (status, got string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET /x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: %s\r\nUpgrade: %s\r\n%s\r\n",
		token, connection, upgrade, extra)
	cr := bufio.NewReader(conn)
	status, _ = cr.ReadString('\n')
	length := 0
	for {
		l, err := cr.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
		if v, ok := strings.CutPrefix(strings.ToLower(l), "content-length: "); ok {
			fmt.Sscan(v, &length)
		}
	}
	if !strings.Contains(status, " 101 ") {
		b := make([]byte, length)
		io.ReadFull(cr, b)
		return status, string(b)
	}
	fmt.Fprintf(conn, "hello\n")
	got, _ = cr.ReadString('\n')
	return status, got
}

// TestProxyUpgrades: any protocol an upstream's handler accepts is
// upgraded to through the proxy, over a plain or a TLS connection to an
// upstream that also speaks HTTP/2 (ALPN would otherwise pick h2, where no
// upgrade exists); upgrades to HTTP itself (h2c, TLS) are not forwarded, so
// that a client cannot turn one checked request into a connection on which
// it sends the upstream any request it likes.
func TestProxyUpgrades(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			f := newFixture(t, nil, "")
			up := httptest.NewUnstartedServer(http.HandlerFunc(upgradeAny))
			tr := NewTransport()
			if useTLS {
				up.EnableHTTP2 = true
				up.StartTLS()
				pool := x509.NewCertPool()
				pool.AddCert(up.Certificate())
				tr.TLSClientConfig = &tls.Config{RootCAs: pool}
			} else {
				up.Start()
			}
			defer up.Close()
			p, err := NewProxy(ProxyConfig{Verifier: f.handler.verifier, Routes: []Route{{PathPrefix: "/", Upstream: up.URL}}, Transport: tr})
			if err != nil {
				t.Fatal(err)
			}
			px := httptest.NewServer(p)
			defer px.Close()
			addr := strings.TrimPrefix(px.URL, "http://")
			good := sign(t, f.signerA, nil)

			// Ordinary requests still use HTTP/2 where the upstream offers it.
			req, _ := http.NewRequest("GET", px.URL+"/x", nil)
			req.Header.Set("Authorization", "Bearer "+good)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			wantProto := "HTTP/1.1"
			if useTLS {
				wantProto = "HTTP/2.0"
			}
			if !strings.HasPrefix(string(b), "plain "+wantProto) {
				t.Errorf("plain request reached the upstream as %q, want %s", b, wantProto)
			}

			for _, proto := range []string{"websocket", "my-proto", "My-Proto/2"} {
				status, got := rawUpgrade(t, addr, good, "Upgrade", proto, "")
				if !strings.Contains(status, " 101 ") || got != "echo:hello\n" {
					t.Errorf("upgrade to %s: %q then %q, want 101 and an echo", proto, status, got)
				}
			}
			for _, tc := range []struct{ connection, upgrade, extra string }{
				{"Upgrade, HTTP2-Settings", "h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"},
				{"Upgrade", "h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"},
				{"Upgrade", "H2C", ""},
				{"Upgrade", "websocket, h2c", ""},
				{"Upgrade", "HTTP/2.0", ""},
				{"Upgrade", "TLS/1.2, HTTP/1.1", ""},
			} {
				status, got := rawUpgrade(t, addr, good, tc.connection, tc.upgrade, tc.extra)
				if !strings.Contains(status, " 200 ") || !strings.HasPrefix(got, "plain ") || strings.Contains(got, "AAMA") {
					t.Errorf("upgrade to %s: %q %q, want it forwarded as a plain request without HTTP2-Settings", tc.upgrade, status, got)
				}
			}
			if status, _ := rawUpgrade(t, addr, "x.y.z", "Upgrade", "my-proto", ""); !strings.Contains(status, " 401 ") {
				t.Errorf("upgrade with a bad token: %q, want 401", status)
			}
		})
	}
}

// rawGet sends target as it is, on a new connection, and returns the
// response's status code and body.
func rawGet(t *testing.T, addr, target, token string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n", target, auth)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestProxyAmbiguousPaths: the proxy refuses a path that upstreams read in
// different ways with 400, before it reaches the upstream, and forwards the
// path it decided on: dot segments resolved, empty segments dropped,
// escapes of unreserved characters decoded, never the raw form.
func TestProxyAmbiguousPaths(t *testing.T) {
	f := newFixture(t, nil, "")
	up := upstreamEcho()
	defer up.Close()
	px := newProxy(t, f, up.URL)
	addr := strings.TrimPrefix(px.URL, "http://")
	good := sign(t, f.signerA, nil) // "read write": no admin scope
	for _, tc := range []struct {
		target, token string
		status        int
		uri           string // what the upstream received, for a 200
	}{
		{"/public/..;/admin/x", "", 400, ""},
		{"/public/..;/admin/x", good, 400, ""},
		{"/admin;x/y", good, 400, ""},
		{"/public/x;jsessionid=1", "", 400, ""},
		{"/public/%2e%2e/admin/x", good, 400, ""},
		{"/public/%252e%252e/admin/x", "", 400, ""},
		{"/public/..%2Fadmin/x", "", 400, ""},
		{"/public/..%5Cadmin/x", "", 400, ""},
		{`/public\..\admin\x`, "", 400, ""},
		{"/public/%00", "", 400, ""},
		{"/public/%c0%ae%c0%ae/admin/x", "", 400, ""},
		{"/public/a/../b?q=1", "", 200, "/public/b?q=1"},
		{"//public//x/", "", 200, "/public/x/"},
		{"/public/./x/.", "", 200, "/public/x/"},
		{"/public/x/..", "", 200, "/public/"},
		{"/orders/%7euser/%41b%2a", good, 200, "/orders/~user/Ab%2A"},
		{"/orders/caf%c3%a9%20x", good, 200, "/orders/caf%C3%A9%20x"},
		{"/orders/a=b,c:d@e", good, 200, "/orders/a=b,c:d@e"},
		{"/public/../admin/x", good, 403, ""},
	} {
		t.Run(tc.target, func(t *testing.T) {
			status, body := rawGet(t, addr, tc.target, tc.token)
			if status != tc.status {
				t.Fatalf("status %d, want %d (body %s)", status, tc.status, body)
			}
			switch {
			case status == 400:
				if body != `{"error":"invalid_request","error_description":"ambiguous_path"}` {
					t.Errorf("body %s", body)
				}
			case status == 200:
				if !strings.HasSuffix(body, " uri="+tc.uri) {
					t.Errorf("upstream got %q, want uri=%s", body, tc.uri)
				}
			}
		})
	}
}

// TestProxyPathOptions: where a rule opts in, the proxy forwards the
// parameters and encoded slashes it allows, on the path it decided on.
func TestProxyPathOptions(t *testing.T) {
	f := newFixture(t, nil, "")
	up := upstreamEcho()
	defer up.Close()
	px := newProxyRoutes(t, f, []Route{
		{PathPrefix: "/public", Anonymous: true, AllowPathParams: true, Upstream: up.URL},
		{PathPrefix: "/files", AllowEncodedSlashes: true, Upstream: up.URL},
		{PathPrefix: "/admin", Scopes: []string{"admin"}, CaseInsensitive: true, Upstream: up.URL},
		{PathPrefix: "/", Upstream: up.URL},
	})
	addr := strings.TrimPrefix(px.URL, "http://")
	good := sign(t, f.signerA, nil)
	for _, tc := range []struct {
		target, token string
		status        int
		want          string // the end of the upstream's echo
	}{
		{"/public/x;jsessionid=1", "", 200, "uri=/public/x;jsessionid=1"},
		{"/public/a/..;/b;k=v?q", "", 200, "uri=/public/b;k=v?q"},
		{"/public/..;/admin/x", "", 400, ""},
		{"/files/group%2fname", good, 200, "uri=/files/group%2Fname"},
		{"/files%2F..%2Fadmin", good, 400, ""},
		{"/ADMIN/x", good, 403, ""},
		{"/Admin/x", "", 401, ""},
	} {
		t.Run(tc.target, func(t *testing.T) {
			status, body := rawGet(t, addr, tc.target, tc.token)
			if status != tc.status || !strings.HasSuffix(body, tc.want) {
				t.Fatalf("got %d %q, want %d ending %q", status, body, tc.status, tc.want)
			}
		})
	}
}

func TestProxyFaults(t *testing.T) {
	f := newFixture(t, nil, "")
	// An upstream that is down answers 502, with no internals in the body.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	px := newProxy(t, f, deadURL)
	req, _ := http.NewRequest("GET", px.URL+"/orders", nil)
	req.Header.Set("Authorization", "Bearer "+sign(t, f.signerA, nil))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || strings.Contains(string(b), "127.0.0.1") {
		t.Errorf("dead upstream: %d %q", resp.StatusCode, b)
	}

	// No route: 404 from keygate, not the upstream.
	p2, err := NewProxy(ProxyConfig{Verifier: f.handler.verifier, Routes: []Route{{PathPrefix: "/only", Upstream: deadURL}}})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	p2.ServeHTTP(w, httptest.NewRequest("GET", "/elsewhere", nil))
	if w.Code != 404 {
		t.Errorf("unknown route: %d", w.Code)
	}

	// Bad configuration is refused.
	if _, err := NewProxy(ProxyConfig{Verifier: f.handler.verifier}); err == nil {
		t.Error("no routes accepted")
	}
	if _, err := NewProxy(ProxyConfig{Verifier: f.handler.verifier, Routes: []Route{{Upstream: "ftp://x"}}}); err == nil {
		t.Error("ftp upstream accepted")
	}
}

// TestProxyRefusesConnect: a CONNECT, in any case and either form of its
// target, is refused and never reaches an upstream, which net/http's
// Transport would ask for a tunnel in authority form.
func TestProxyRefusesConnect(t *testing.T) {
	f := newFixture(t, nil, "")
	var reached atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	defer up.Close()
	px := newProxyRoutes(t, f, []Route{{PathPrefix: "/", Anonymous: true, Upstream: up.URL}})
	addr := strings.TrimPrefix(px.URL, "http://")
	for _, line := range []string{"CONNECT internal.example:443", "connect internal.example:443", "Connect /x"} {
		if status, _, body := testnet.Exchange(t, addr, line+" HTTP/1.1\r\nHost: internal.example:443\r\n"); status != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d %s, want 405", line, status, body)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the upstream was reached %d times", n)
	}
}
