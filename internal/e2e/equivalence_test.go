package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/testnet"
	"github.com/keygate/keygate/jose"
	"github.com/keygate/keygate/middleware"
)

// The equivalence matrix: one table of request spellings (method case,
// HEAD, method overrides, path encodings and dot segments, duplicate and
// forged forwarding headers, host spellings, oversized, repeated and odd
// Authorization headers), each sent through every front end keygate has:
// forward-auth behind the real nginx, Caddy and Traefik (where installed),
// the reverse proxy, ext_authz over gRPC and over HTTP, and the net/http
// middleware. Each must reach the decision the rule table says, and so the
// same decision as the others. A front end may differ only where it cannot
// see or change what the application reads, and each such difference is
// written down in the row, with why.

// equivRules is the rule table of every front end: writes to /api need a
// scope and the rest of it is open; /docs takes GET (and so HEAD) with
// read, anything else with admin; /forms takes POST anonymously and
// anything else with admin; a public host; /admin; /public; any token
// elsewhere.
var equivRules = []config.Route{
	{PathPrefix: "/api", Methods: []string{"POST", "PUT", "PATCH", "DELETE"}, Scopes: []string{"write"}},
	{PathPrefix: "/api", Anonymous: true},
	{PathPrefix: "/docs", Methods: []string{"GET"}, Scopes: []string{"read"}},
	{PathPrefix: "/docs", Scopes: []string{"admin"}},
	{PathPrefix: "/forms", Methods: []string{"POST"}, Anonymous: true},
	{PathPrefix: "/forms", Scopes: []string{"admin"}},
	{Host: "public.example", PathPrefix: "/", Anonymous: true},
	{PathPrefix: "/admin", Scopes: []string{"admin"}},
	{PathPrefix: "/public", Anonymous: true},
	{PathPrefix: "/"},
}

// outcome is a decision as a client sees it.
type outcome int

const (
	allow        outcome = iota + 1
	unauthorized         // 401: no token, or one that does not verify
	forbidden            // 403: a token short of the rule's scope
	refused              // a request keygate reads in more than one way, or no HTTP request at all
)

func (o outcome) String() string {
	return [...]string{"?", "allow", "unauthorized", "forbidden", "refused"}[o]
}

// dimension is what a row spells differently. The middleware guards the
// handler the application's own router chose, so it reads only the
// Authorization header: it runs the rows of dimension authz.
type dimension int

const (
	dimMethod dimension = iota
	dimPath
	dimForwarding
	dimHost
	dimAuthz
)

// spelling is one row of the matrix.
type spelling struct {
	name    string
	dim     dimension
	method  string
	host    string // "" for api.example
	target  string // path and query, as sent
	token   string // a key of the tokens map, "" for none; or raw: the Authorization header lines
	raw     []string
	headers []string // other header lines, sent as given
	want    outcome
	// except is what a front end decides instead, and why: a proxy in
	// front that refuses or rewrites the request itself, or the reverse
	// proxy, which forwards the method and path it decided on and so has
	// no other reading to refuse.
	except map[string]exception
}

type exception struct {
	want outcome
	why  string
}

// Front-end names.
const (
	feNginx      = "forward-auth behind nginx"
	feCaddy      = "forward-auth behind Caddy"
	feTraefik    = "forward-auth behind Traefik"
	feProxy      = "reverse proxy"
	feGRPC       = "ext_authz over gRPC"
	feEnvoyHTTP  = "ext_authz over HTTP"
	feMiddleware = "net/http middleware"
)

// nginxLower: nginx answers 400 itself to a method with a lower case letter.
var nginxLower = map[string]exception{feNginx: {refused, "nginx refuses a lower case method with 400 before asking keygate"}}

func with(m map[string]exception, fe string, e exception) map[string]exception {
	out := map[string]exception{fe: e}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// caddyHash: Caddy escapes a raw '#' in the path it sends keygate and the
// application alike, so both read it as a character of the path.
var caddyHash = map[string]exception{feCaddy: {allow, "Caddy sends keygate and the application a raw # escaped, %23"}}

// nginxDuplicate: nginx answers 400 itself to a repeated Authorization.
var nginxDuplicate = map[string]exception{feNginx: {refused, "nginx refuses a repeated Authorization header with 400"}}

// proxyCanonical: the reverse proxy forwards the canonical path, so the
// upstream reads only that; Traefik cleans the path (as Go's path.Clean)
// before it asks keygate and forwards that same clean path.
func proxyCanonical(want outcome) map[string]exception {
	return map[string]exception{
		feProxy:   {want, "the proxy forwards the canonical path, the one it decided on"},
		feTraefik: {want, "Traefik cleans the path and sends keygate and the application the same clean one"},
	}
}

func equivSpellings() []spelling {
	hdr := func(lines ...string) []string { return lines }
	big, huge := strings.Repeat("A", 9<<10), strings.Repeat("A", 65<<10)
	return []spelling{
		// Method: case, HEAD, override, syntax.
		{name: "DELETE without a token", dim: dimMethod, method: "DELETE", target: "/api/orders/7", want: unauthorized},
		{name: "DELETE with write", dim: dimMethod, method: "DELETE", target: "/api/orders/7", token: "write", want: allow},
		{name: "DELETE with read", dim: dimMethod, method: "DELETE", target: "/api/orders/7", token: "read", want: forbidden},
		{name: "delete without a token", dim: dimMethod, method: "delete", target: "/api/orders/7", want: unauthorized, except: nginxLower},
		{name: "Delete with read", dim: dimMethod, method: "Delete", target: "/api/orders/7", token: "read", want: forbidden, except: nginxLower},
		{name: "dElEtE with write", dim: dimMethod, method: "dElEtE", target: "/api/orders/7", token: "write", want: allow, except: nginxLower},
		{name: "post without a token", dim: dimMethod, method: "post", target: "/api/orders", want: unauthorized, except: nginxLower},
		{name: "GET is open", dim: dimMethod, method: "GET", target: "/api/orders/7", want: allow},
		{name: "get is open", dim: dimMethod, method: "get", target: "/api/orders/7", want: allow, except: nginxLower},
		{name: "PURGE is open", dim: dimMethod, method: "PURGE", target: "/api/orders/7", want: allow},
		{name: "HEAD under the GET rule, no token", dim: dimMethod, method: "HEAD", target: "/docs/a", want: unauthorized},
		{name: "HEAD under the GET rule with read", dim: dimMethod, method: "HEAD", target: "/docs/a", token: "read", want: allow},
		{name: "head with read: as sent another rule", dim: dimMethod, method: "head", target: "/docs/a", token: "read", want: refused,
			except: with(nginxLower, feProxy, exception{allow, "the proxy forwards HEAD upper case, so no upstream reads it as sent"})},
		{name: "OPTIONS is not GET", dim: dimMethod, method: "OPTIONS", target: "/docs/a", token: "read", want: forbidden},
		{name: "POST to a POST-only open rule", dim: dimMethod, method: "POST", target: "/forms/a", want: allow},
		{name: "POST as DELETE by X-HTTP-Method-Override", dim: dimMethod, method: "POST", target: "/forms/a",
			headers: hdr("X-HTTP-Method-Override: DELETE"), want: refused},
		{name: "POST as delete by x-http-method", dim: dimMethod, method: "POST", target: "/forms/a",
			headers: hdr("x-http-method: delete"), want: refused},
		{name: "POST as PUT by X-Method-Override, twice", dim: dimMethod, method: "POST", target: "/forms/a",
			headers: hdr("X-Method-Override: POST", "X-Method-Override: PUT"), want: refused},
		{name: "POST as DELETE by _method", dim: dimMethod, method: "POST", target: "/forms/a?_method=DELETE", want: refused},
		{name: "POST as DELETE by PHP's .method", dim: dimMethod, method: "POST", target: "/forms/a?x=1&.method=DELETE", want: refused},
		{name: "POST as DELETE by %5Fmethod", dim: dimMethod, method: "POST", target: "/forms/a?%5Fmethod=delete", want: refused},
		{name: "POST as DELETE under the same rule", dim: dimMethod, method: "POST", target: "/api/orders/7",
			headers: hdr("X-HTTP-Method-Override: DELETE"), token: "write", want: allow},
		// Yii2, Slim 4 and CakePHP take the header on any method.
		{name: "GET as DELETE by X-HTTP-Method-Override", dim: dimMethod, method: "GET", target: "/api/orders/7",
			headers: hdr("X-HTTP-Method-Override: DELETE"), want: refused},
		{name: "HEAD as DELETE by X-Method-Override", dim: dimMethod, method: "HEAD", target: "/api/orders/7",
			headers: hdr("X-Method-Override: delete"), want: refused},
		{name: "GET as GET by X-HTTP-Method-Override", dim: dimMethod, method: "GET", target: "/api/orders/7",
			headers: hdr("X-HTTP-Method-Override: GET"), want: allow},
		// CGI-style servers (PHP's SAPIs, Rack's) read '_' in a header
		// name as '-' (nginx passes such a header on with
		// underscores_in_headers on, as the test's nginx has it).
		{name: "POST as DELETE by X_HTTP_Method_Override", dim: dimMethod, method: "POST", target: "/forms/a",
			headers: hdr("X_HTTP_Method_Override: DELETE"), want: refused},
		{name: "POST as DELETE by x-http_method", dim: dimMethod, method: "POST", target: "/forms/a",
			headers: hdr("x-http_method: DELETE"), want: refused},
		{name: "GET as DELETE by X_Method_Override", dim: dimMethod, method: "GET", target: "/api/orders/7",
			headers: hdr("X_Method_Override: DELETE"), want: refused},
		// PHP drops leading spaces from a query name and ends it at a NUL.
		{name: "POST as DELETE by +_method", dim: dimMethod, method: "POST", target: "/forms/a?+_method=DELETE", want: refused},
		{name: "POST as DELETE by %20_method", dim: dimMethod, method: "POST", target: "/forms/a?x=1&%20_method=DELETE", want: refused},
		{name: "POST as DELETE by _method%00", dim: dimMethod, method: "POST", target: "/forms/a?_method%00x=DELETE", want: refused},
		// Caddy's php_fastcgi gives PHP the query as Go parsed it, '#'
		// and all, so $_GET has the _method after it.
		{name: "POST as DELETE by a _method after a raw # in the query", dim: dimMethod, method: "POST",
			target: "/forms/a?x=1#&_method=DELETE", want: refused},
		{name: "POST as DELETE by a tab-led override", dim: dimMethod, method: "POST", target: "/forms/a",
			headers: hdr("X-HTTP-Method-Override:\tDELETE\t"), want: refused},
		{name: "a method that is not a token", dim: dimMethod, method: "DEL@TE", target: "/api/orders/7", want: refused},

		// Path: encodings, dot and empty segments, parameters, case.
		{name: "admin without a token", dim: dimPath, method: "GET", target: "/admin/users", want: unauthorized},
		{name: "admin with read", dim: dimPath, method: "GET", target: "/admin/users", token: "read", want: forbidden},
		{name: "admin with admin", dim: dimPath, method: "GET", target: "/admin/users", token: "admin", want: allow},
		{name: "public", dim: dimPath, method: "GET", target: "/public/x", want: allow},
		// Read as sent, under the open /public; resolved, under /admin:
		// the stricter rule decides.
		{name: "dot segments out of public", dim: dimPath, method: "GET", target: "/public/../admin/users", want: unauthorized},
		{name: "dot segments out of admin", dim: dimPath, method: "GET", target: "/admin/../public/x", want: refused,
			except: proxyCanonical(allow)},
		{name: "encoded dots", dim: dimPath, method: "GET", target: "/public/%2e%2e/admin/users", want: refused,
			except: map[string]exception{feTraefik: {unauthorized,
				"Traefik decodes %2e and cleans the path, and sends keygate and the application the same /admin/users"}}},
		{name: "double encoded dots", dim: dimPath, method: "GET", target: "/public/%252e%252e/admin/users", want: refused},
		{name: "a leading //", dim: dimPath, method: "GET", target: "//admin/users", want: refused,
			except: proxyCanonical(unauthorized)},
		{name: "empty segments", dim: dimPath, method: "GET", target: "/admin//users", token: "admin", want: allow},
		{name: "a path parameter", dim: dimPath, method: "GET", target: "/public/..;/admin/users", want: refused},
		{name: "an encoded slash", dim: dimPath, method: "GET", target: "/public%2F..%2Fadmin/users", want: refused},
		{name: "a trailing dot (IIS)", dim: dimPath, method: "GET", target: "/admin./users", want: refused},
		// A request target has no fragment (RFC 9112 §3.2), and servers
		// read a raw '#' differently: nginx and PHP's servers end the path
		// or query there, Go's keeps it in the path or query as a
		// character (so a Go file server resolves "/public#/../admin").
		{name: "a raw # before dot segments", dim: dimPath, method: "GET", target: "/public#/../admin/users", want: refused},
		{name: "a raw # after the path", dim: dimPath, method: "GET", target: "/public/x#y", want: refused, except: caddyHash},
		{name: "a raw # and a ? after it", dim: dimPath, method: "GET", target: "/public/x#?/../../admin/users", want: refused,
			except: caddyHash},
		{name: "backslashes around dots", dim: dimPath, method: "GET", target: "/public\\..\\admin/users", want: refused},
		{name: "encoded backslashes around dots", dim: dimPath, method: "GET", target: "/public%5c..%5cadmin/users", want: refused},
		{name: "upper case is another prefix", dim: dimPath, method: "GET", target: "/ADMIN/users", token: "read", want: allow},

		// Forwarding headers a client forges or repeats.
		{name: "forged forwarding headers to an open path", dim: dimForwarding, method: "GET", target: "/admin/users",
			headers: hdr("X-Forwarded-Uri: /public/x", "X-Original-URI: /public/x", "X-Forwarded-Method: GET",
				"X-Original-Method: GET", "X-Forwarded-Host: public.example", "Forwarded: host=public.example",
				"X-Original-URL: /public/x", "X-Rewrite-URL: /public/x", "X-Envoy-Original-Path: /public/x"),
			want: unauthorized},
		{name: "forged method headers, repeated", dim: dimForwarding, method: "DELETE", target: "/api/orders/7",
			headers: hdr("X-Forwarded-Method: GET", "X-Forwarded-Method: GET", "X-Original-Method: GET", "x-original-method: GET"),
			want:    unauthorized},
		{name: "forged forwarding headers with underscores", dim: dimForwarding, method: "GET", target: "/admin/users",
			headers: hdr("X_Forwarded_Uri: /public/x", "X_Original_URI: /public/x", "X_Forwarded_Host: public.example"),
			want:    unauthorized},

		// Host.
		{name: "the public host", dim: dimHost, method: "GET", host: "public.example", target: "/admin/users", want: allow},
		{name: "the public host in upper case", dim: dimHost, method: "GET", host: "PUBLIC.EXAMPLE", target: "/admin/users", want: allow},
		{name: "the public host with a port", dim: dimHost, method: "GET", host: "public.example:8443", target: "/admin/users", want: allow},
		{name: "the public host with a trailing dot", dim: dimHost, method: "GET", host: "public.example.", target: "/admin/users", want: allow},
		{name: "another host", dim: dimHost, method: "GET", host: "api.example", target: "/admin/users", want: unauthorized},
		// An absolute-form target names the host in place of Host (RFC
		// 9112 §3.2.2), for keygate and the application alike.
		{name: "an absolute-form target naming the public host", dim: dimHost, method: "GET", target: "http://public.example/admin/users",
			want: allow},
		{name: "an absolute-form target naming another host", dim: dimHost, method: "GET", host: "public.example",
			target: "http://api.example/admin/users", want: unauthorized},

		// Authorization.
		{name: "a token", dim: dimAuthz, method: "GET", target: "/orders", token: "read", want: allow},
		{name: "no token", dim: dimAuthz, method: "GET", target: "/orders", want: unauthorized},
		{name: "a token short of the scope", dim: dimAuthz, method: "GET", target: "/admin/users", token: "read", want: forbidden},
		{name: "two Authorization headers", dim: dimAuthz, method: "GET", target: "/orders",
			raw: []string{"Bearer {read}", "Bearer {admin}"}, want: unauthorized, except: nginxDuplicate},
		{name: "two Authorization headers in other cases", dim: dimAuthz, method: "GET", target: "/orders",
			raw: []string{"Bearer {read}"}, headers: hdr("authorization: Bearer {admin}"), want: unauthorized, except: nginxDuplicate},
		{name: "two tokens in one header", dim: dimAuthz, method: "GET", target: "/orders",
			raw: []string{"Bearer {read}, Bearer {admin}"}, want: unauthorized},
		{name: "an oversized token", dim: dimAuthz, method: "GET", target: "/orders", raw: []string{"Bearer " + big}, want: unauthorized},
		{name: "an Authorization header over 64 KiB", dim: dimAuthz, method: "GET", target: "/orders", raw: []string{"Bearer " + huge},
			want: unauthorized, except: map[string]exception{feNginx: {refused,
				"nginx answers 400 itself to a header line over its buffers (large_client_header_buffers 4 64k)"}}},
		{name: "the scheme in lower case", dim: dimAuthz, method: "GET", target: "/orders", raw: []string{"bearer {read}"}, want: allow},
		{name: "the scheme in upper case", dim: dimAuthz, method: "GET", target: "/orders", raw: []string{"BEARER {read}"}, want: allow},
		{name: "two spaces after the scheme", dim: dimAuthz, method: "GET", target: "/orders", raw: []string{"Bearer  {read}"}, want: allow},
		{name: "a tab after the scheme", dim: dimAuthz, method: "GET", target: "/orders", raw: []string{"Bearer\t{read}"}, want: unauthorized},
		{name: "another scheme", dim: dimAuthz, method: "GET", target: "/orders", raw: []string{"Basic YWxpY2U6c2VjcmV0"}, want: unauthorized},
		{name: "an empty bearer", dim: dimAuthz, method: "GET", target: "/orders", raw: []string{"Bearer"}, want: unauthorized},
		{name: "a truncated token", dim: dimAuthz, method: "GET", target: "/orders", raw: []string{"Bearer {read-cut}"}, want: unauthorized},
	}
}

// request is a spelling with its tokens filled in: the request a client
// sends.
type request struct {
	method, host, target string
	headers              []string // every header line but Host
}

func (s spelling) request(tokens map[string]string) request {
	fill := func(v string) string {
		for k, tok := range tokens {
			v = strings.ReplaceAll(v, "{"+k+"}", tok)
		}
		return v
	}
	r := request{method: s.method, host: s.host, target: s.target}
	if r.host == "" {
		r.host = "api.example"
	}
	if s.token != "" {
		r.headers = append(r.headers, "Authorization: Bearer "+tokens[s.token])
	}
	for _, a := range s.raw {
		r.headers = append(r.headers, "Authorization: "+fill(a))
	}
	for _, h := range s.headers {
		r.headers = append(r.headers, fill(h))
	}
	return r
}

// origin is the request's host and origin-form target, as Envoy makes
// :authority and :path of them: an absolute-form target names both.
func (r request) origin() (host, target string) {
	rest, ok := strings.CutPrefix(r.target, "http://")
	if !ok {
		return r.host, r.target
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[:i], rest[i:]
	}
	return rest, "/"
}

// head is the request as HTTP/1.1 lines, to path instead of its target
// when path is set.
func (r request) head(path string) string {
	if path == "" {
		path = r.target
	}
	return fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\n%s", r.method, path, r.host, strings.Join(append(r.headers, ""), "\r\n"))
}

// answer is what a client got: the status, the reason keygate gave where
// the front end shows it, and for a request let through what the
// application saw.
type answer struct {
	status int
	reason string // "" where the front end does not pass keygate's body on
	app    string // "sub=... scopes=..." from the application
}

// frontEnd sends a request through one front end.
type frontEnd struct {
	name string
	send func(t *testing.T, r request) answer
	// refusal is the status of a refused request (403 from forward-auth,
	// since nginx turns a 400 from auth_request into a 500; 400 elsewhere).
	refusal int
	// hidesReason: the proxy in front answers a 403 with its own page
	// (nginx), so a refused request and a missing scope look alike.
	hidesReason bool
	dims        []dimension // what it reads; every dimension when empty
}

// equivApp echoes the claim headers the front end gave it.
func equivApp(t *testing.T) string {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "sub=%s scopes=%s", strings.Join(r.Header.Values("X-Auth-Subject"), "|"),
			strings.Join(r.Header.Values("X-Auth-Scopes"), "|"))
	}))
	t.Cleanup(app.Close)
	return strings.TrimPrefix(app.URL, "http://")
}

// equivNode starts a node from the matrix's issuer and rules behind proxy,
// with the reverse proxy's routes to app and an Envoy gRPC listener when
// asked; it returns the traffic and gRPC addresses.
func equivNode(t *testing.T, jwksURL, proxy, app string, grpcListener bool) (traffic, grpcAddr string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "forward_auth:\n  proxy: %s\n  rules:\n", proxy)
	for _, r := range equivRules {
		fmt.Fprintf(&b, "    - %s\n", ruleYAML(r, ""))
	}
	if app != "" {
		b.WriteString("routes:\n")
		for _, r := range equivRules {
			fmt.Fprintf(&b, "  - %s\n", ruleYAML(r, "http://"+app))
		}
	}
	if grpcListener {
		b.WriteString("envoy_grpc_listen: 127.0.0.1:0\n")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "keygate.yaml")
	if err := os.WriteFile(path, []byte(configYAML(jwksURL, b.String())), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(context.Background(), server.Config{Gateway: cfg, ConfigPath: path, Metrics: telemetry.New(),
		Logger: slog.New(slog.DiscardHandler),
		Node:   &node.Config{DataDir: filepath.Join(dir, "data"), Issuer: "http://self", Audience: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	var ls server.Listeners
	listen := []*net.Listener{&ls.Traffic}
	if grpcListener {
		listen = append(listen, &ls.EnvoyGRPC)
	}
	for _, l := range listen {
		if *l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeListeners(ctx, ls) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeListeners: %v", err)
		}
		s.Close()
	})
	if grpcListener {
		grpcAddr = ls.EnvoyGRPC.Addr().String()
	}
	return ls.Traffic.Addr().String(), grpcAddr
}

// ruleYAML writes a rule as a flow mapping, with upstream when given.
func ruleYAML(r config.Route, upstream string) string {
	var f []string
	if r.Host != "" {
		f = append(f, "host: "+r.Host)
	}
	f = append(f, "path_prefix: "+r.PathPrefix)
	if len(r.Methods) > 0 {
		f = append(f, "methods: ["+strings.Join(r.Methods, ", ")+"]")
	}
	if r.Anonymous {
		f = append(f, "anonymous: true")
	}
	if len(r.Scopes) > 0 {
		f = append(f, "scopes: ["+strings.Join(r.Scopes, ", ")+"]")
	}
	if upstream != "" {
		f = append(f, "upstream: "+upstream)
	}
	return "{" + strings.Join(f, ", ") + "}"
}

// viaHTTP sends a request to addr (a proxy in front, or keygate's proxy)
// and reads keygate's reason from a JSON body when there is one.
func viaHTTP(addr string) func(t *testing.T, r request) answer {
	return func(t *testing.T, r request) answer {
		status, _, body := testnet.Exchange(t, addr, r.head(""))
		return answerOf(status, body)
	}
}

func answerOf(status int, body string) answer {
	a := answer{status: status}
	if status == http.StatusOK {
		a.app = body
		return a
	}
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal([]byte(body), &e) == nil {
		a.reason = e.Description
	}
	return a
}

// viaEnvoyHTTP sends what Envoy's HTTP ext_authz filter, configured as the
// README's block, sends keygate: the method and Host of the request,
// path_prefix and its path (with the query), and only the allowed headers.
// Envoy's codec refuses a method that is not a token itself.
func viaEnvoyHTTP(addr string, allowed func(name string) bool) func(t *testing.T, r request) answer {
	return func(t *testing.T, r request) answer {
		if !isToken(r.method) {
			return answer{status: http.StatusBadRequest}
		}
		kept := r
		kept.host, kept.target = r.origin()
		kept.headers = nil
		for _, h := range r.headers {
			name, _, _ := strings.Cut(h, ":")
			if allowed(name) {
				kept.headers = append(kept.headers, h)
			}
		}
		status, _, body := testnet.Exchange(t, addr, kept.head(gateway.AuthPath+kept.target))
		a := answerOf(status, body)
		a.app = "" // keygate's 200 carries the claim headers, not the application's body
		return a
	}
}

// viaGRPC sends the CheckRequest Envoy builds for the request: lower-case
// header names, repeated headers joined with ",", the path as sent.
func viaGRPC(t *testing.T, addr string) func(t *testing.T, r request) answer {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := authv3.NewAuthorizationClient(conn)
	return func(t *testing.T, r request) answer {
		if !isToken(r.method) {
			return answer{status: http.StatusBadRequest}
		}
		host, target := r.origin()
		hs := map[string]string{":method": r.method, ":path": target, ":authority": host}
		for _, h := range r.headers {
			name, value, _ := strings.Cut(h, ":")
			name, value = strings.ToLower(name), strings.TrimSpace(value)
			if old, ok := hs[name]; ok {
				value = old + "," + value
			}
			hs[name] = value
		}
		resp, err := client.Check(t.Context(), &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
			Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
				Method: r.method, Path: target, Host: host, Scheme: "http", Protocol: "HTTP/1.1", Headers: hs}}}})
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if d := resp.GetDeniedResponse(); d != nil {
			return answerOf(int(d.GetStatus().GetCode()), d.GetBody())
		}
		var sub, scopes string
		for _, h := range resp.GetOkResponse().GetHeaders() {
			switch h.GetHeader().GetKey() {
			case "x-auth-subject":
				sub = h.GetHeader().GetValue()
			case "x-auth-scopes":
				scopes = h.GetHeader().GetValue()
			}
		}
		return answer{status: http.StatusOK, app: "sub=" + sub + " scopes=" + scopes}
	}
}

func isToken(m string) bool { return gateway.CheckMethod(m) == nil }

// viaMiddleware serves the rule table with the net/http middleware behind
// Go's ServeMux, as an application would guard its handlers.
func viaMiddleware(t *testing.T, jwksURL string) func(t *testing.T, r request) answer {
	mw, err := middleware.New(t.Context(), middleware.Config{Issuers: []middleware.Issuer{{Issuer: idpIssuer, JWKSURL: jwksURL,
		Algorithms: []jose.Alg{jose.ES256}, Audiences: []string{"api"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mw.Close)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sub, scopes string
		if id, ok := middleware.FromContext(r.Context()); ok {
			sub, scopes = id.Subject, id.Scope
		}
		fmt.Fprintf(w, "sub=%s scopes=%s", sub, scopes)
	})
	mux := http.NewServeMux()
	for _, r := range equivRules {
		h := http.Handler(app)
		if !r.Anonymous {
			h = mw.Require(r.Scopes...)(app)
		}
		pattern := r.Host + strings.TrimSuffix(r.PathPrefix, "/") + "/"
		if len(r.Methods) == 0 {
			mux.Handle(pattern, h)
		}
		for _, m := range r.Methods {
			mux.Handle(m+" "+pattern, h)
		}
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return viaHTTP(strings.TrimPrefix(srv.URL, "http://"))
}

// TestFrontEndEquivalence drives every spelling through every front end.
// nginx and Caddy are required in CI; Traefik runs where installed
// (scripts/integration-traefik.sh builds one and runs this test with it).
func TestFrontEndEquivalence(t *testing.T) {
	idp := newIDP(t)
	signer := ecSigner(t, "k1")
	idp.publish(t, signer)
	tokens := map[string]string{}
	for _, scope := range []string{"read", "write", "admin"} {
		tokens[scope] = idpToken(t, signer, map[string]any{"scope": scope})
	}
	tokens["read-cut"] = tokens["read"][:len(tokens["read"])-6]
	app := equivApp(t)
	headers := []string{"X-Auth-Scopes", "X-Auth-Subject"}

	var fes []frontEnd
	nginxKG, grpcAddr := equivNode(t, idp.srv.URL, gateway.ProxyNginx, app, true)
	proxyFE := frontEnd{name: feProxy, send: viaHTTP(nginxKG), refusal: http.StatusBadRequest}
	fes = append(fes, proxyFE, frontEnd{name: feGRPC, send: viaGRPC(t, grpcAddr), refusal: http.StatusBadRequest})
	snip := gateway.Snippet{App: app, Headers: headers}
	for _, p := range []struct {
		name, preset string
		bin          func(*testing.T) string
		block        func(gateway.Snippet) (string, error)
		start        func(*testing.T, string, string) string
	}{
		{feNginx, gateway.ProxyNginx, testnet.NginxBinary, gateway.Snippet.Nginx, testnet.StartNginx},
		{feCaddy, gateway.ProxyCaddy, testnet.CaddyBinary, gateway.Snippet.Caddy, testnet.StartCaddy},
		{feTraefik, gateway.ProxyTraefik, testnet.TraefikBinary, gateway.Snippet.Traefik, testnet.StartTraefik},
	} {
		var bin string
		if !t.Run("find "+p.name, func(t *testing.T) { bin = p.bin(t) }) || bin == "" {
			continue
		}
		kg := nginxKG
		if p.preset != gateway.ProxyNginx {
			kg, _ = equivNode(t, idp.srv.URL, p.preset, "", false)
		}
		s := snip
		s.Keygate = kg
		block, err := p.block(s)
		if err != nil {
			t.Fatal(err)
		}
		fes = append(fes, frontEnd{name: p.name, send: viaHTTP(p.start(t, bin, block)), refusal: http.StatusForbidden,
			hidesReason: p.preset == gateway.ProxyNginx})
	}
	envoyKG, _ := equivNode(t, idp.srv.URL, gateway.ProxyEnvoy, "", false)
	allowed := envoyAllowedHeaders(t, readmeEnvoyHTTPFilter(t)) // the README's block
	fes = append(fes, frontEnd{name: feEnvoyHTTP, send: viaEnvoyHTTP(envoyKG, allowed), refusal: http.StatusForbidden},
		frontEnd{name: feMiddleware, send: viaMiddleware(t, idp.srv.URL), refusal: http.StatusBadRequest,
			dims: []dimension{dimAuthz}})

	var mu sync.Mutex
	decided := map[string]map[string]outcome{} // row → front end → outcome
	for _, fe := range fes {
		t.Run(fe.name, func(t *testing.T) {
			for _, s := range equivSpellings() {
				if len(fe.dims) > 0 && !slices.Contains(fe.dims, s.dim) {
					continue
				}
				t.Run(s.name, func(t *testing.T) {
					want, why := s.want, "the rule table"
					if e, ok := s.except[fe.name]; ok {
						want, why = e.want, e.why
					}
					got := fe.send(t, s.request(tokens))
					o := fe.outcome(got)
					// A 403 without keygate's reason (nginx's own page, or
					// any answer to HEAD) is a refusal or a missing scope.
					hidden := fe.hidesReason || strings.EqualFold(s.method, http.MethodHead)
					if hidden && got.status == fe.refusal && (want == refused || want == forbidden) {
						o = want
					}
					mu.Lock()
					if decided[s.name] == nil {
						decided[s.name] = map[string]outcome{}
					}
					decided[s.name][fe.name] = o
					mu.Unlock()
					if o != want {
						t.Fatalf("%s (status %d, reason %q); want %s (%s)", o, got.status, got.reason, want, why)
					}
					checkAnswer(t, s, got)
				})
			}
		})
	}
	// Across front ends: a row allowed by one is allowed by every other
	// that reads it, unless a written exception says why not.
	for _, s := range equivSpellings() {
		for fe, o := range decided[s.name] {
			if _, excepted := s.except[fe]; !excepted && o != s.want {
				t.Errorf("%s: %s decided %s; the rule table says %s", s.name, fe, o, s.want)
			}
		}
	}
}

// outcome classifies an answer: a refusal is the front end's refusal
// status with a request-reading reason, or a 400 from the proxy in front
// (or the HTTP server) before keygate was asked.
func (fe frontEnd) outcome(a answer) outcome {
	reading := slices.Contains([]string{gateway.ReasonAmbiguousPath, gateway.ReasonAmbiguousMethod, gateway.ReasonInvalidMethod}, a.reason)
	switch {
	case a.status == http.StatusOK:
		return allow
	case a.status == http.StatusUnauthorized:
		return unauthorized
	case a.status == http.StatusBadRequest, a.status == http.StatusRequestHeaderFieldsTooLarge,
		a.status == fe.refusal && reading:
		return refused
	case a.status == http.StatusForbidden:
		return forbidden
	}
	return 0
}

// checkAnswer checks, for a request let through, that the application saw
// the token's identity, or none on an anonymous rule; and the reason of a
// refusal where the front end shows it.
func checkAnswer(t *testing.T, s spelling, a answer) {
	t.Helper()
	if a.status != http.StatusOK || a.app == "" || strings.EqualFold(s.method, "HEAD") {
		return
	}
	want := "sub= scopes=" // an anonymous rule
	switch {
	case s.token != "":
		want = "sub=alice scopes=" + s.token
	case len(s.raw) > 0: // every raw row let through carries the read token
		want = "sub=alice scopes=read"
	}
	if a.app != want {
		t.Errorf("the application saw %q, want %q", a.app, want)
	}
}
