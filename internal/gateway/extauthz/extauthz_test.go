package extauthz

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/verify"
	"github.com/keygate/keygate/internal/verify/verifykeys"
	"github.com/keygate/keygate/jose"
)

const (
	issA = "https://a.example.com/" // every asymmetric algorithm
	issB = "https://b.example.com/" // requires scope b:use of every token
	issH = "https://h.example.com/" // a shared HS256 secret
)

var testNow = time.Unix(1_800_000_000, 0)

// claimHeaders are the headers the fixture's issuers map.
var claimHeaders = []verify.HeaderMapping{{Header: "X-Auth-Subject", Claim: "sub"}, {Header: "X-Auth-Scopes", Claim: "scope"},
	{Header: "X-Auth-Tenant", Claim: "tenant"}}

// routes are the security review's rules plus a host rule.
var routes = []gateway.Route{
	{PathPrefix: "/public", Anonymous: true},
	{Host: "admin.example.com", Scopes: []string{"admin"}},
	{PathPrefix: "/admin", Scopes: []string{"admin"}},
	{PathPrefix: "/"},
}

type fixture struct {
	signers map[string]*jose.Signer // by algorithm name, and "B" for issuer B
	rsaPub  *rsa.PublicKey          // the RS256 key's, for the algorithm confusion
	revoked *revoke.Memory
	pipe    *verify.Pipeline
	metrics *telemetry.Metrics
	svc     *Service
	decider *gateway.Decider
	forward *gateway.ForwardAuth // the same pipeline behind nginx's forward-auth
}

func newFixture(t testing.TB, opts ...func(*verify.Config)) *fixture {
	t.Helper()
	f := &fixture{signers: map[string]*jose.Signer{}, revoked: revoke.NewMemory(), metrics: telemetry.New()}
	rsa1, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsa2, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f.rsaPub = &rsa1.PublicKey
	ec256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	ecB, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	secret := make([]byte, 32)
	rand.Read(secret)
	for _, k := range []struct {
		name string
		alg  jose.Alg
		priv any
	}{{"RS256", jose.RS256, rsa1}, {"PS256", jose.PS256, rsa2}, {"ES256", jose.ES256, ec256}, {"ES384", jose.ES384, ec384},
		{"EdDSA", jose.EdDSA, ed}, {"HS256", jose.HS256, secret}, {"B", jose.ES256, ecB}} {
		s, err := jose.NewSigner(k.alg, strings.ToLower(k.name)+"-1", k.priv)
		if err != nil {
			t.Fatal(k.name, err)
		}
		f.signers[k.name] = s
	}
	var aKeys []*jose.Key
	for _, n := range []string{"RS256", "PS256", "ES256", "ES384", "EdDSA"} {
		aKeys = append(aKeys, f.signers[n].Key())
	}
	vcfg := verify.Config{
		Policies: []verify.Policy{
			{Issuer: issA, Keys: verifykeys.NewStatic(jose.NewKeySet(aKeys...)),
				Algorithms: []jose.Alg{jose.RS256, jose.PS256, jose.ES256, jose.ES384, jose.EdDSA}, Audiences: []string{"api"}, Headers: claimHeaders},
			{Issuer: issB, Keys: verifykeys.NewStatic(jose.NewKeySet(f.signers["B"].Key())), Algorithms: []jose.Alg{jose.ES256},
				Headers: claimHeaders[:1], Scopes: []string{"b:use"}},
			{Issuer: issH, Keys: verifykeys.NewStatic(jose.NewKeySet(f.signers["HS256"].Key())), Algorithms: []jose.Alg{jose.HS256},
				Audiences: []string{"api"}, Headers: claimHeaders},
		},
		Revocation: f.revoked,
		Now:        func() time.Time { return testNow },
	}
	for _, o := range opts {
		o(&vcfg)
	}
	f.pipe, err = verify.New(vcfg)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"X-Auth-Subject", "X-Auth-Scopes", "X-Auth-Tenant"}
	f.decider, err = gateway.NewDecider(gateway.DeciderConfig{Verifier: f.pipe, Routes: routes, Cookie: "kg", Headers: names,
		Metrics: f.metrics.Decisions(FrontEnd, nil)})
	if err != nil {
		t.Fatal(err)
	}
	nginx, _ := gateway.Preset(gateway.ProxyNginx)
	f.forward, err = gateway.NewForwardAuth(gateway.ForwardAuthConfig{Verifier: f.pipe, Routes: routes, Cookie: "kg",
		Forwarding: nginx, Headers: names})
	if err != nil {
		t.Fatal(err)
	}
	f.svc = New(Config{Decider: func() *gateway.Decider { return f.decider }, Metrics: f.metrics.Decisions(FrontEnd, nil)})
	return f
}

// sign signs the base claims (issuer A, sub alice, aud api, an hour left,
// scope "read write", tenant acme) changed by claims (nil deletes).
func (f *fixture) sign(t testing.TB, signer string, claims map[string]any) string {
	t.Helper()
	base := map[string]any{"iss": issA, "sub": "alice", "aud": "api", "exp": testNow.Add(time.Hour).Unix(),
		"scope": "read write", "tenant": "acme"}
	if signer == "HS256" {
		base["iss"] = issH
	}
	for k, v := range claims {
		if v == nil {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	tok, err := f.signers[signer].SignClaims(base)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// hmacToken is a token of header and claims MACed with HS256 under secret:
// the algorithm confusion, with the RSA public key as the secret.
func hmacToken(header string, claims map[string]any, secret []byte) string {
	b64 := base64.RawURLEncoding.EncodeToString
	payload, _ := json.Marshal(claims)
	in := b64([]byte(header)) + "." + b64(payload)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(in))
	return in + "." + b64(m.Sum(nil))
}

// checkRequest is the CheckRequest Envoy's ext_authz filter builds for a
// plain-text HTTP/1.1 request from 203.0.113.7 to the listener at
// 10.0.0.2:8080 (filters/http/ext_authz and filters/common/ext_authz/
// check_request_utils.cc): the header names in lower case, pseudo-headers
// included, :path with its query as path, :authority as host.
func checkRequest(method, host, path string, headers map[string]string) *authv3.CheckRequest {
	hs := map[string]string{":method": method, ":path": path, ":authority": host, ":scheme": "http",
		"x-forwarded-proto": "http", "x-request-id": "6b3f9b0e-7e3c-4f5e-9d7e-0c1c2e1d9f00", "user-agent": "curl/8.5.0",
		"accept": "*/*"}
	for k, v := range headers {
		hs[strings.ToLower(k)] = v
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source:      &authv3.AttributeContext_Peer{Address: sockAddr("203.0.113.7", 53412)},
		Destination: &authv3.AttributeContext_Peer{Address: sockAddr("10.0.0.2", 8080)},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id: "12345678901234567890", Method: method, Headers: hs, Path: path, Host: host, Scheme: "http",
			Protocol: "HTTP/1.1", Size: 0,
		}},
	}}
}

func sockAddr(ip string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}
}

// dialBuf serves svc's gRPC server on an in-memory listener and returns a
// client connection to it.
func dialBuf(t testing.TB, srv *Server) *grpc.ClientConn {
	t.Helper()
	ln := bufconn.Listen(1 << 20)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop(); <-done })
	return conn
}

// answer is a CheckResponse in the terms the tests compare.
type answer struct {
	status    int               // the HTTP status Envoy answers (200 for OK)
	headers   map[string]string // OK: the headers set; denied: the response headers
	remove    []string          // OK: headers_to_remove
	body      string
	rpcCode   codes.Code
	appendAct []corev3.HeaderValueOption_HeaderAppendAction
}

func read(t testing.TB, resp *authv3.CheckResponse) answer {
	t.Helper()
	a := answer{headers: map[string]string{}, rpcCode: codes.Code(resp.GetStatus().GetCode())}
	var hs []*corev3.HeaderValueOption
	switch r := resp.GetHttpResponse().(type) {
	case *authv3.CheckResponse_OkResponse:
		a.status = 200
		hs, a.remove = r.OkResponse.GetHeaders(), r.OkResponse.GetHeadersToRemove()
	case *authv3.CheckResponse_DeniedResponse:
		a.status = int(r.DeniedResponse.GetStatus().GetCode())
		hs, a.body = r.DeniedResponse.GetHeaders(), r.DeniedResponse.GetBody()
	default:
		t.Fatalf("CheckResponse without an HTTP response: %v", resp)
	}
	for _, h := range hs {
		if _, dup := a.headers[h.GetHeader().GetKey()]; dup {
			t.Errorf("header %s set twice", h.GetHeader().GetKey())
		}
		a.headers[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
		a.appendAct = append(a.appendAct, h.GetAppendAction())
	}
	return a
}

// allSpellings are every claim header's '_' spellings, lower case: always
// in headers_to_remove.
var allSpellings = []string{"x_auth-subject", "x-auth_subject", "x_auth_subject", "x_auth-scopes", "x-auth_scopes",
	"x_auth_scopes", "x_auth-tenant", "x-auth_tenant", "x_auth_tenant"}

type checkCase struct {
	name                string
	method, host, path  string
	headers             map[string]string
	raw                 [][2]string // encode_raw_headers: header_map entries, repeated keys kept
	status              int
	reason              string            // x-keygate-reason of a refusal
	challenge           string            // exact www-authenticate, "" for none
	set                 map[string]string // exact claim headers set on an OK
	remove              []string          // claim headers removed on an OK, besides allSpellings
	forwardAuthDisagree bool              // forward-auth answers otherwise (documented)
}

func (f *fixture) cases(t testing.TB) []checkCase {
	bearer := func(signer string, claims map[string]any) map[string]string {
		return map[string]string{"authorization": "Bearer " + f.sign(t, signer, claims)}
	}
	good := map[string]string{"x-auth-subject": "alice", "x-auth-scopes": "read write", "x-auth-tenant": "acme"}
	const (
		bare  = `Bearer realm="keygate"`
		inval = `Bearer realm="keygate", error="invalid_token", error_description="`
	)
	pub, err := jose.MarshalPublicPEM(f.rsaPub)
	if err != nil {
		t.Fatal(err)
	}
	confused := hmacToken(`{"alg":"HS256","kid":"rs256-1","typ":"JWT"}`, map[string]any{"iss": issA, "sub": "alice", "aud": "api",
		"exp": testNow.Add(time.Hour).Unix(), "scope": "admin"}, pub)
	none := strings.Join([]string{base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"rs256-1"}`)),
		strings.Split(f.sign(t, "RS256", nil), ".")[1], ""}, ".")
	// Alice's header and claims, the signature of Bob's token.
	alice, bob := f.sign(t, "ES256", nil), f.sign(t, "ES256", map[string]any{"sub": "bob"})
	spliced := alice[:strings.LastIndexByte(alice, '.')] + bob[strings.LastIndexByte(bob, '.'):]
	f.revoked.RevokeID(issA, "jti-revoked", testNow.Add(24*time.Hour))
	var cs []checkCase
	for _, alg := range []string{"RS256", "PS256", "ES256", "ES384", "EdDSA", "HS256"} {
		cs = append(cs, checkCase{name: "valid " + alg, method: "GET", host: "api.example.com", path: "/orders/42?expand=items",
			headers: bearer(alg, nil), status: 200, set: good})
	}
	cs = append(cs, []checkCase{
		{name: "expired", method: "GET", host: "api.example.com", path: "/orders",
			headers: bearer("ES256", map[string]any{"exp": testNow.Add(-time.Hour).Unix()}), status: 401, reason: "expired", challenge: inval + `expired"`},
		{name: "not yet valid", method: "GET", host: "api.example.com", path: "/orders",
			headers: bearer("ES256", map[string]any{"nbf": testNow.Add(time.Hour).Unix()}), status: 401, reason: "not_yet_valid", challenge: inval + `not_yet_valid"`},
		{name: "wrong audience", method: "GET", host: "api.example.com", path: "/orders",
			headers: bearer("RS256", map[string]any{"aud": "other"}), status: 401, reason: "wrong_audience", challenge: inval + `wrong_audience"`},
		{name: "untrusted issuer", method: "GET", host: "api.example.com", path: "/orders",
			headers: bearer("ES256", map[string]any{"iss": "https://evil.example/"}), status: 401, reason: "wrong_issuer", challenge: inval + `wrong_issuer"`},
		{name: "missing scope for the admin rule", method: "POST", host: "api.example.com", path: "/admin/users",
			headers: bearer("ES256", nil), status: 403, reason: "insufficient_scope",
			challenge: `Bearer realm="keygate", error="insufficient_scope", error_description="insufficient_scope"`},
		{name: "admin scope for the admin rule", method: "POST", host: "api.example.com", path: "/admin/users",
			headers: bearer("ES256", map[string]any{"scope": "admin"}), status: 200,
			set: map[string]string{"x-auth-subject": "alice", "x-auth-scopes": "admin", "x-auth-tenant": "acme"}},
		{name: "missing scope for the host rule", method: "GET", host: "Admin.Example.com:443", path: "/users",
			headers: bearer("ES256", nil), status: 403, reason: "insufficient_scope",
			challenge: `Bearer realm="keygate", error="insufficient_scope", error_description="insufficient_scope"`},
		{name: "issuer policy scope missing", method: "GET", host: "api.example.com", path: "/orders",
			headers: bearer("B", map[string]any{"iss": issB}), status: 403, reason: "insufficient_scope",
			challenge: `Bearer realm="keygate", error="insufficient_scope", error_description="insufficient_scope"`},
		{name: "issuer B with its scope sets only its header", method: "GET", host: "api.example.com", path: "/orders",
			headers: bearer("B", map[string]any{"iss": issB, "scope": "b:use"}), status: 200,
			set: map[string]string{"x-auth-subject": "alice"}, remove: []string{"x-auth-scopes", "x-auth-tenant"}},
		{name: "alg confusion: HS256 MACed with the RSA public key", method: "GET", host: "api.example.com", path: "/admin/x",
			headers: map[string]string{"authorization": "Bearer " + confused}, status: 401, reason: "unsupported_alg", challenge: inval + `unsupported_alg"`},
		{name: "alg none", method: "GET", host: "api.example.com", path: "/orders",
			headers: map[string]string{"authorization": "Bearer " + none}, status: 401, reason: "unsupported_alg", challenge: inval + `unsupported_alg"`},
		{name: "key of another issuer", method: "GET", host: "api.example.com", path: "/orders",
			headers: bearer("B", nil), status: 401, reason: "unknown_kid", challenge: inval + `unknown_kid"`},
		{name: "revoked", method: "GET", host: "api.example.com", path: "/orders",
			headers: bearer("ES256", map[string]any{"jti": "jti-revoked"}), status: 401, reason: "revoked", challenge: inval + `revoked"`},
		{name: "bad signature", method: "GET", host: "api.example.com", path: "/orders",
			headers: map[string]string{"authorization": "Bearer " + spliced},
			status:  401, reason: "bad_signature", challenge: inval + `bad_signature"`},
		{name: "oversized token", method: "GET", host: "api.example.com", path: "/orders",
			headers: map[string]string{"authorization": "Bearer " + strings.Repeat("a", 9000)}, status: 401, reason: "too_large", challenge: inval + `too_large"`},
		{name: "token of 60 KiB, as Envoy's default header limit lets through", method: "GET", host: "api.example.com", path: "/orders",
			headers: map[string]string{"authorization": "Bearer " + strings.Repeat("a", 60<<10-100)}, status: 401, reason: "too_large", challenge: inval + `too_large"`},
		{name: "missing token", method: "GET", host: "api.example.com", path: "/orders", status: 401, reason: "missing_token", challenge: bare},
		{name: "basic scheme is no bearer credential", method: "GET", host: "api.example.com", path: "/orders",
			headers: map[string]string{"authorization": "Basic YTpi"}, status: 401, reason: "missing_token", challenge: bare},
		{name: "empty bearer", method: "GET", host: "api.example.com", path: "/orders",
			headers: map[string]string{"authorization": "Bearer "}, status: 401, reason: "empty_token",
			challenge: `Bearer realm="keygate", error="invalid_request", error_description="the bearer token is empty"`},
		{name: "two authorization headers, joined by Envoy", method: "GET", host: "api.example.com", path: "/orders",
			headers: map[string]string{"authorization": "Bearer " + f.sign(t, "ES256", nil) + ",Bearer " + f.sign(t, "ES256", nil)},
			status:  401, reason: "malformed", challenge: inval + `malformed"`, forwardAuthDisagree: true},
		{name: "two authorization headers in header_map", method: "GET", host: "api.example.com", path: "/orders",
			raw:    [][2]string{{"authorization", "Bearer " + f.sign(t, "ES256", nil)}, {"authorization", "Bearer " + f.sign(t, "ES256", nil)}},
			status: 401, reason: "duplicate_authorization",
			challenge: `Bearer realm="keygate", error="invalid_request", error_description="more than one Authorization header"`},
		{name: "token in header_map", method: "GET", host: "api.example.com", path: "/orders",
			raw: [][2]string{{"authorization", "Bearer " + f.sign(t, "ES256", nil)}}, status: 200, set: good},
		{name: "cookie", method: "GET", host: "api.example.com", path: "/orders",
			headers: map[string]string{"cookie": "theme=dark; kg=" + f.sign(t, "ES256", nil)}, status: 200, set: good},
		{name: "forged claim headers are overwritten or removed", method: "GET", host: "api.example.com", path: "/orders",
			headers: map[string]string{"authorization": "Bearer " + f.sign(t, "ES256", map[string]any{"tenant": nil}),
				"x-auth-subject": "mallory", "x-auth-scopes": "admin", "x-auth-tenant": "evil", "x_auth_scopes": "admin", "X-Auth_Subject": "mallory"},
			status: 200, set: map[string]string{"x-auth-subject": "alice", "x-auth-scopes": "read write"}, remove: []string{"x-auth-tenant"}},
		{name: "anonymous rule removes every claim header", method: "GET", host: "api.example.com", path: "/public/logo.png",
			headers: map[string]string{"x-auth-subject": "mallory", "x-auth-scopes": "admin"}, status: 200, set: map[string]string{},
			remove: []string{"x-auth-subject", "x-auth-scopes", "x-auth-tenant"}},
		{name: "query is not part of the path", method: "GET", host: "api.example.com", path: "/public/x?next=/admin/users", status: 200,
			set: map[string]string{}, remove: []string{"x-auth-subject", "x-auth-scopes", "x-auth-tenant"}},
		{name: "forwarding headers are not read", method: "GET", host: "api.example.com", path: "/admin/users",
			headers: map[string]string{"x-forwarded-uri": "/public/x", "x-original-uri": "/public/x", "x-forwarded-host": "public.example.com",
				"x-original-method": "GET", "x-forwarded-method": "GET", "x-envoy-original-path": "/public/x"},
			status: 401, reason: "missing_token", challenge: bare},
		{name: "ambiguous path: parameters", method: "GET", host: "api.example.com", path: "/public/..;/admin/users",
			status: 400, reason: "ambiguous_path"},
		{name: "ambiguous path: encoded dots", method: "GET", host: "api.example.com", path: "/public/%2e%2e/admin/users",
			headers: bearer("ES256", nil), status: 400, reason: "ambiguous_path"},
		{name: "ambiguous path: empty segment then dots", method: "GET", host: "api.example.com", path: "/admin//../users",
			headers: bearer("ES256", nil), status: 400, reason: "ambiguous_path"},
		{name: "dot segments resolved", method: "GET", host: "api.example.com", path: "/public/../admin/x",
			headers: bearer("ES256", nil), status: 403, reason: "insufficient_scope",
			challenge: `Bearer realm="keygate", error="insufficient_scope", error_description="insufficient_scope"`},
	}...)
	return cs
}

func (c *checkCase) request() *authv3.CheckRequest {
	req := checkRequest(c.method, c.host, c.path, c.headers)
	if c.raw != nil {
		hr := req.Attributes.Request.Http
		hm := &corev3.HeaderMap{}
		for k, v := range hr.Headers {
			hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
		}
		for _, kv := range c.raw {
			hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[0], RawValue: []byte(kv[1])})
		}
		hr.Headers, hr.HeaderMap = nil, hm
	}
	return req
}

// TestCheck drives the gRPC service with the CheckRequests Envoy builds,
// over the case table of forward-auth, and checks each answer against the
// table and against forward-auth's for the same request behind nginx.
func TestCheck(t *testing.T) {
	f := newFixture(t)
	client := authv3.NewAuthorizationClient(dialBuf(t, NewServer(f.svc, ServerOptions{})))
	for _, tc := range f.cases(t) {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client.Check(t.Context(), tc.request())
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			// The rules Envoy's API sets on every field (header names
			// and values, status codes).
			if err := resp.ValidateAll(); err != nil {
				t.Errorf("the CheckResponse breaks Envoy's validation rules: %v", err)
			}
			a := read(t, resp)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d (%+v)", a.status, tc.status, a)
			}
			for _, act := range a.appendAct {
				if act != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
					t.Errorf("append action %v, want OVERWRITE_IF_EXISTS_OR_ADD", act)
				}
			}
			if tc.status == 200 {
				if a.rpcCode != codes.OK {
					t.Errorf("rpc status %v on an OK response", a.rpcCode)
				}
				if tc.set != nil && !mapsEqual(a.headers, tc.set) {
					t.Errorf("headers set %v, want %v", a.headers, tc.set)
				}
				want := slices.Concat(tc.remove, allSpellings)
				if !sameSet(a.remove, want) {
					t.Errorf("headers_to_remove %q, want %q", a.remove, want)
				}
				for forged := range tc.headers {
					forged = strings.ToLower(forged)
					if strings.HasPrefix(forged, "x-auth") || strings.HasPrefix(forged, "x_auth") {
						if _, set := a.headers[forged]; !set && !slices.Contains(a.remove, forged) {
							t.Errorf("forged %s is neither overwritten nor removed", forged)
						}
					}
				}
			} else {
				if a.rpcCode == codes.OK {
					t.Errorf("rpc status OK on a denied response")
				}
				if got := a.headers[ReasonHeader]; got != tc.reason {
					t.Errorf("%s %q, want %q", ReasonHeader, got, tc.reason)
				}
				if got := a.headers["www-authenticate"]; got != tc.challenge {
					t.Errorf("www-authenticate %q, want %q", got, tc.challenge)
				}
				if a.headers["content-type"] != "application/json" || a.headers["cache-control"] != "no-store" {
					t.Errorf("response headers %v", a.headers)
				}
				var body struct{ Error, ErrorDescription string }
				if err := json.Unmarshal([]byte(a.body), &body); err != nil || body.Error == "" {
					t.Errorf("body is not keygate's JSON error: %q", a.body)
				}
				if strings.Contains(a.body, "eyJ") {
					t.Errorf("body echoes the token: %s", a.body)
				}
			}
			if !tc.forwardAuthDisagree {
				f.sameAsForwardAuth(t, &tc, a)
			}
		})
	}
}

// sameAsForwardAuth checks that forward-auth, behind nginx, answers the
// same request (its method, host and path in nginx's headers, its
// Authorization and Cookie headers) as a answers it: the same status (403
// where ext_authz answers 400 for an ambiguous path), challenge, body and
// claim header values.
func (f *fixture) sameAsForwardAuth(t *testing.T, tc *checkCase, a answer) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/auth", nil)
	r.Header.Set("X-Original-Method", tc.method)
	r.Header.Set("X-Original-Uri", tc.path)
	r.Header.Set("X-Forwarded-Host", tc.host)
	for k, v := range tc.headers {
		if k == "authorization" || k == "cookie" {
			r.Header.Add(k, v)
		}
	}
	for _, kv := range tc.raw {
		r.Header.Add(kv[0], kv[1])
	}
	w := httptest.NewRecorder()
	f.forward.ServeHTTP(w, r)
	want := a.status
	switch a.headers[ReasonHeader] {
	case gateway.ReasonAmbiguousPath, gateway.ReasonAmbiguousMethod, gateway.ReasonInvalidMethod:
		// A request keygate reads in more than one way: 400 to Envoy,
		// 403 to nginx (which turns a 400 from auth_request into a 500).
		want = http.StatusForbidden
	}
	if w.Code != want {
		t.Errorf("forward-auth answers %d, ext_authz %d", w.Code, a.status)
	}
	if w.Code == 200 {
		for _, h := range []string{"X-Auth-Subject", "X-Auth-Scopes", "X-Auth-Tenant"} {
			if got := a.headers[strings.ToLower(h)]; got != w.Header().Get(h) {
				t.Errorf("%s: forward-auth %q, ext_authz %q", h, w.Header().Get(h), got)
			}
		}
		return
	}
	if got := w.Header().Get("WWW-Authenticate"); got != a.headers["www-authenticate"] {
		t.Errorf("WWW-Authenticate: forward-auth %q, ext_authz %q", got, a.headers["www-authenticate"])
	}
	if w.Body.String() != a.body {
		t.Errorf("body: forward-auth %q, ext_authz %q", w.Body, a.body)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestCheckMetrics: every decision counts under the envoy_grpc front end.
func TestCheckMetrics(t *testing.T) {
	f := newFixture(t)
	good := f.sign(t, "ES256", nil)
	for _, req := range []*authv3.CheckRequest{
		checkRequest("GET", "x", "/orders", map[string]string{"authorization": "Bearer " + good}),
		checkRequest("GET", "x", "/orders", map[string]string{"authorization": "Bearer " + good}),
		checkRequest("GET", "x", "/orders", nil),
		checkRequest("GET", "x", "/public/%2e%2e/admin", nil),
		{},
	} {
		if _, err := f.svc.Check(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	got := decisions(t, f.metrics)
	want := map[string]float64{
		`keygate_decisions_total{frontend="envoy_grpc",reason="",result="allow"}`:               2,
		`keygate_decisions_total{frontend="envoy_grpc",reason="missing_token",result="deny"}`:   1,
		`keygate_decisions_total{frontend="envoy_grpc",reason="ambiguous_path",result="deny"}`:  1,
		`keygate_decisions_total{frontend="envoy_grpc",reason="invalid_request",result="deny"}`: 1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("keygate_decisions_total %v, want %v", got, want)
	}
}

// decisions is every keygate_decisions_total series of m.
func decisions(t *testing.T, m *telemetry.Metrics) map[string]float64 {
	t.Helper()
	all, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for k, v := range all {
		if strings.HasPrefix(k, "keygate_decisions_total{") {
			got[k] = v
		}
	}
	return got
}

// TestHealthAndReflection: grpc.health.v1 reports what SetReady says, for
// the server and the Authorization service, and reflection is off unless
// asked for.
func TestHealthAndReflection(t *testing.T) {
	f := newFixture(t)
	for _, reflect := range []bool{false, true} {
		srv := NewServer(f.svc, ServerOptions{Reflection: reflect})
		conn := dialBuf(t, srv)
		hc := healthpb.NewHealthClient(conn)
		for _, ready := range []bool{false, true, false} {
			srv.SetReady(ready)
			want := healthpb.HealthCheckResponse_NOT_SERVING
			if ready {
				want = healthpb.HealthCheckResponse_SERVING
			}
			for _, svc := range []string{"", ServiceName} {
				resp, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: svc})
				if err != nil || resp.GetStatus() != want {
					t.Errorf("health of %q after SetReady(%v): %v, %v; want %v", svc, ready, resp.GetStatus(), err, want)
				}
			}
		}
		stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
		if err == nil {
			// With reflection off the server has no such service: Send then returns
			// io.EOF, and Recv the Unimplemented status.
			stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
			_, err = stream.Recv()
		}
		if got := status.Code(err); reflect && got != codes.OK || !reflect && got != codes.Unimplemented {
			t.Errorf("reflection %v: %v", reflect, err)
		}
	}
}

// TestCheckConcurrent runs checks from many goroutines (under -race in CI)
// while the decider in force is swapped, as a reload swaps it; each answer
// must be the one its token and path call for.
func TestCheckConcurrent(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	current := f.decider
	f.svc = New(Config{Decider: func() *gateway.Decider { mu.Lock(); defer mu.Unlock(); return current },
		Metrics: f.metrics.Decisions(FrontEnd, nil)})
	client := authv3.NewAuthorizationClient(dialBuf(t, NewServer(f.svc, ServerOptions{})))
	cases := f.cases(t)
	stop := make(chan struct{})
	swapped := make(chan struct{})
	go func() {
		defer close(swapped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			d, err := gateway.NewDecider(gateway.DeciderConfig{Verifier: f.pipe, Routes: routes, Cookie: "kg",
				Headers: []string{"X-Auth-Subject", "X-Auth-Scopes", "X-Auth-Tenant"}, Metrics: f.metrics.Decisions(FrontEnd, nil)})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			current = d
			mu.Unlock()
		}
	}()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				tc := cases[(g*7+i)%len(cases)]
				resp, err := client.Check(t.Context(), tc.request())
				if err != nil {
					t.Errorf("%s: %v", tc.name, err)
					return
				}
				if a := read(t, resp); a.status != tc.status || tc.status != 200 && a.headers[ReasonHeader] != tc.reason ||
					tc.set != nil && tc.status == 200 && !mapsEqual(a.headers, tc.set) {
					t.Errorf("%s: got %d %v, want %d %s", tc.name, a.status, a.headers, tc.status, tc.reason)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-swapped
}

// TestMessageSize: a CheckRequest up to MaxRecvMsgSize is decided on (a
// token of 200 KiB gets keygate's 401 too_large); a larger one is refused
// by gRPC.
func TestMessageSize(t *testing.T) {
	f := newFixture(t)
	client := authv3.NewAuthorizationClient(dialBuf(t, NewServer(f.svc, ServerOptions{})))
	resp, err := client.Check(t.Context(), checkRequest("GET", "x", "/orders",
		map[string]string{"authorization": "Bearer " + strings.Repeat("a", 200<<10)}))
	if err != nil {
		t.Fatal(err)
	}
	if a := read(t, resp); a.status != 401 || a.headers[ReasonHeader] != "too_large" {
		t.Errorf("200 KiB token: %d %v", a.status, a.headers)
	}
	_, err = client.Check(t.Context(), checkRequest("GET", "x", "/orders",
		map[string]string{"authorization": "Bearer " + strings.Repeat("a", MaxRecvMsgSize)}))
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a CheckRequest over MaxRecvMsgSize: %v, want ResourceExhausted", err)
	}
}

// FuzzCheck: whatever method, host, path and credentials a CheckRequest
// carries, Check answers in HTTP terms (never a gRPC error), as
// forward-auth behind nginx answers the same request, and every claim
// header's '_' spellings are removed from an allowed one.
func FuzzCheck(f *testing.F) {
	fx := newFixture(f)
	good := fx.sign(f, "ES256", nil)
	for _, tc := range fx.cases(f) {
		if tc.raw == nil {
			f.Add(tc.method, tc.host, tc.path, tc.headers["authorization"], tc.headers["cookie"])
		}
	}
	f.Add("GET", "api.example.com", "/public/%c0%ae%c0%ae/admin", "Bearer "+good, "")
	f.Add("", "", "", "", "kg=")
	f.Add("GET", "[::1]:80", "*", "bearer  "+good, "kg="+good+"; kg=x")
	f.Fuzz(func(t *testing.T, method, host, path, authorization, cookie string) {
		hs := map[string]string{}
		if authorization != "" {
			hs["authorization"] = authorization
		}
		if cookie != "" {
			hs["cookie"] = cookie
		}
		resp, err := fx.svc.Check(t.Context(), checkRequest(method, host, path, hs))
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if err := resp.ValidateAll(); err != nil {
			t.Errorf("the CheckResponse breaks Envoy's validation rules: %v", err)
		}
		a := read(t, resp)
		switch a.status {
		case 200:
			for _, s := range allSpellings {
				if !slices.Contains(a.remove, s) {
					t.Errorf("%s not removed", s)
				}
			}
		case 400, 401, 403:
		default:
			t.Fatalf("status %d", a.status)
		}
		uri := path
		if i := strings.IndexAny(uri, "?#"); i >= 0 {
			uri = uri[:i]
		}
		if uri == "" || strings.ContainsAny(method+host+authorization+cookie, "\r\n\x00") {
			return // nginx sends none of these; forward-auth would read its own request
		}
		tc := checkCase{method: method, host: host, path: path, headers: hs}
		fx.sameAsForwardAuth(t, &tc, a)
	})
}

// TestCredentialHeaders checks the headers a Check reads: names in any
// case, repeated ones as separate values, and nothing left over from an
// earlier Check (the headers' map is reused from Check to Check).
func TestCredentialHeaders(t *testing.T) {
	f := newFixture(t)
	tok := f.sign(t, "ES256", nil)
	check := func(t *testing.T, req *authv3.CheckRequest) (status int, reason string) {
		t.Helper()
		resp, err := f.svc.Check(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOkResponse() != nil {
			return 200, ""
		}
		d := resp.GetDeniedResponse()
		for _, h := range d.GetHeaders() {
			if h.GetHeader().GetKey() == ReasonHeader {
				reason = h.GetHeader().GetValue()
			}
		}
		return int(d.GetStatus().GetCode()), reason
	}
	withHeaders := func(hs ...[2]string) *authv3.CheckRequest {
		req := checkRequest("GET", "api.example.com", "/orders/42", nil)
		hr := req.Attributes.Request.Http
		hm := &corev3.HeaderMap{}
		for k, v := range hr.Headers {
			hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: k, Value: v})
		}
		for _, kv := range hs {
			hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[0], RawValue: []byte(kv[1])})
		}
		hr.Headers, hr.HeaderMap = nil, hm
		return req
	}
	for _, tc := range []struct {
		name    string
		headers [][2]string
		status  int
		reason  string
	}{
		{"lower case", [][2]string{{"authorization", "Bearer " + tok}}, 200, ""},
		{"upper case", [][2]string{{"AUTHORIZATION", "Bearer " + tok}}, 200, ""},
		{"mixed case", [][2]string{{"Authorization", "Bearer " + tok}}, 200, ""},
		{"none", nil, 401, "missing_token"},
		{"two", [][2]string{{"authorization", "Bearer " + tok}, {"Authorization", "Bearer " + tok}}, 401, "duplicate_authorization"},
		{"two, after one", [][2]string{{"authorization", "Bearer " + tok}, {"authorization", "Bearer " + tok}}, 401, "duplicate_authorization"},
		{"cookie, any case", [][2]string{{"COOKIE", "kg=" + tok}}, 200, ""},
		// Unicode case folding would match this (a Kelvin sign for the K);
		// no HTTP front end accepts such a name, and neither does this one.
		{"cookie, Kelvin sign", [][2]string{{"COO\u212AIE", "kg=" + tok}}, 401, "missing_token"},
		{"none again", nil, 401, "missing_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, reason := check(t, withHeaders(tc.headers...))
			if status != tc.status || reason != tc.reason {
				t.Errorf("%d %q, want %d %q", status, reason, tc.status, tc.reason)
			}
		})
	}
}
