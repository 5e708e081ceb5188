package gateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/verify"
	"github.com/keygate/keygate/internal/verify/verifykeys"
	"github.com/keygate/keygate/jose"
)

const (
	issA = "https://a.example.com/"
	issB = "https://b.example.com/"
)

var testNow = time.Unix(1_800_000_000, 0)

type fixture struct {
	signerA, signerB *jose.Signer
	handler          *ForwardAuth
	metrics          *telemetry.Metrics
}

func newSigner(t testing.TB, kid string) *jose.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jose.NewSigner(jose.ES256, kid, k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newFixture(t testing.TB, routes []Route, cookie string) *fixture {
	t.Helper()
	return newFixtureWith(t, routes, cookie, Forwarding{})
}

// newFixtureWith is newFixture behind a given forwarding preset.
func newFixtureWith(t testing.TB, routes []Route, cookie string, fwd Forwarding) *fixture {
	t.Helper()
	headers := []verify.HeaderMapping{{Header: "X-Auth-Subject", Claim: "sub"}, {Header: "X-Auth-Scopes", Claim: "scope"},
		{Header: "X-Auth-Tenant", Claim: "tenant"}, {Header: "X-Auth-Roles", Claim: "realm_access.roles"}}
	return newFixtureMapped(t, routes, cookie, fwd, headers, []string{"X-Auth-Subject", "X-Auth-Scopes", "x-auth-tenant", "X-Auth-Roles"})
}

// newREADMEFixture is newFixtureWith whose issuers map the claim headers of
// the README's configuration.
func newREADMEFixture(t testing.TB, routes []Route, fwd Forwarding) *fixture {
	t.Helper()
	var names []string
	for _, h := range readmeHeaders {
		names = append(names, h.Header)
	}
	return newFixtureMapped(t, routes, "", fwd, readmeHeaders, names)
}

// newFixtureMapped builds the fixture with issuer A mapping headers (B the
// first of them) and forward-auth setting the claim headers names.
func newFixtureMapped(t testing.TB, routes []Route, cookie string, fwd Forwarding, headers []verify.HeaderMapping, names []string) *fixture {
	t.Helper()
	f := &fixture{signerA: newSigner(t, "a1"), signerB: newSigner(t, "b1"), metrics: telemetry.New()}
	p, err := verify.New(verify.Config{
		Policies: []verify.Policy{
			{Issuer: issA, Keys: verifykeys.NewStatic(jose.NewKeySet(f.signerA.Key())), Algorithms: []jose.Alg{jose.ES256},
				Audiences: []string{"api"}, Headers: headers},
			{Issuer: issB, Keys: verifykeys.NewStatic(jose.NewKeySet(f.signerB.Key())), Algorithms: []jose.Alg{jose.ES256},
				Headers: headers[:1], Scopes: []string{"b:use"}},
		},
		Now: func() time.Time { return testNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.handler, err = NewForwardAuth(ForwardAuthConfig{Verifier: p, Routes: routes, Cookie: cookie, Forwarding: fwd,
		Headers: names,
		Metrics: f.metrics.Decisions(telemetry.FrontForwardAuth, nil)})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func sign(t testing.TB, s *jose.Signer, claims map[string]any) string {
	t.Helper()
	base := map[string]any{"iss": issA, "sub": "alice", "aud": "api", "exp": testNow.Add(time.Hour).Unix(),
		"scope": "read write", "tenant": "acme", "realm_access": map[string]any{"roles": []string{"admin", "ops"}}}
	for k, v := range claims {
		if v == nil {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	tok, err := s.SignClaims(base)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type request struct {
	auth    []string
	headers map[string]string
	cookie  string
	target  string // path and query of the /auth request itself
}

func (f *fixture) do(r request) *httptest.ResponseRecorder {
	target := r.target
	if target == "" {
		target = "/auth"
	}
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for _, a := range r.auth {
		req.Header.Add("Authorization", a)
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	if r.cookie != "" {
		req.AddCookie(&http.Cookie{Name: "kg", Value: r.cookie})
	}
	w := httptest.NewRecorder()
	f.handler.ServeHTTP(w, req)
	return w
}

func TestForwardAuthDecisions(t *testing.T) {
	f := newFixture(t, nil, "kg")
	good := sign(t, f.signerA, nil)
	cases := []struct {
		name      string
		req       request
		status    int
		challenge string // exact WWW-Authenticate, "" for none
		headers   map[string]string
	}{
		{"valid", request{auth: []string{"Bearer " + good}}, 200, "",
			map[string]string{"X-Auth-Subject": "alice", "X-Auth-Scopes": "read write", "X-Auth-Tenant": "acme", "X-Auth-Roles": "admin,ops"}},
		{"scheme is case-insensitive", request{auth: []string{"bearer " + good}}, 200, "", nil},
		{"query string appended by the proxy is ignored", request{auth: []string{"Bearer " + good}, target: "/auth?rd=https%3A%2F%2Fx"}, 200, "", nil},
		{"claim missing gives an empty header", request{auth: []string{"Bearer " + sign(t, f.signerA, map[string]any{"tenant": nil})}}, 200, "",
			map[string]string{"X-Auth-Tenant": "", "X-Auth-Subject": "alice"}},
		{"cookie", request{cookie: good}, 200, "", nil},
		{"missing", request{}, 401, `Bearer realm="keygate"`, nil},
		{"empty bearer", request{auth: []string{"Bearer "}}, 401, `Bearer realm="keygate", error="invalid_request", error_description="the bearer token is empty"`, nil},
		{"basic scheme is no bearer credential", request{auth: []string{"Basic YTpi"}}, 401, `Bearer realm="keygate"`, nil},
		{"duplicate authorization", request{auth: []string{"Bearer " + good, "Bearer " + good}}, 401, `Bearer realm="keygate", error="invalid_request", error_description="more than one Authorization header"`, nil},
		{"junk characters", request{auth: []string{"Bearer a\"b.c.d"}}, 401, `Bearer realm="keygate", error="invalid_token", error_description="malformed"`, nil},
		{"bad signature", request{auth: []string{"Bearer " + good[:len(good)-4] + "AAAA"}}, 401, `Bearer realm="keygate", error="invalid_token", error_description="bad_signature"`, nil},
		{"expired", request{auth: []string{"Bearer " + sign(t, f.signerA, map[string]any{"exp": testNow.Add(-time.Hour).Unix()})}}, 401, `Bearer realm="keygate", error="invalid_token", error_description="expired"`, nil},
		{"wrong audience", request{auth: []string{"Bearer " + sign(t, f.signerA, map[string]any{"aud": "other"})}}, 401, `Bearer realm="keygate", error="invalid_token", error_description="wrong_audience"`, nil},
		{"untrusted issuer", request{auth: []string{"Bearer " + sign(t, f.signerA, map[string]any{"iss": "https://evil/"})}}, 401, `Bearer realm="keygate", error="invalid_token", error_description="wrong_issuer"`, nil},
		{"tenant A token signed with B's key", request{auth: []string{"Bearer " + sign(t, f.signerB, nil)}}, 401, `Bearer realm="keygate", error="invalid_token", error_description="unknown_kid"`, nil},
		{"oversized token", request{auth: []string{"Bearer " + strings.Repeat("a", 9000)}}, 401, `Bearer realm="keygate", error="invalid_token", error_description="too_large"`, nil},
		{"issuer policy scope missing", request{auth: []string{"Bearer " + sign(t, f.signerB, map[string]any{"iss": issB})}}, 403, `Bearer realm="keygate", error="insufficient_scope", error_description="insufficient_scope"`, nil},
		{"issuer B with its scope", request{auth: []string{"Bearer " + sign(t, f.signerB, map[string]any{"iss": issB, "scope": "b:use"})}}, 200, "",
			map[string]string{"X-Auth-Subject": "alice", "X-Auth-Tenant": ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := f.do(tc.req)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d (body %s)", w.Code, tc.status, w.Body)
			}
			if got := w.Header().Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
			if tc.status == 200 {
				for _, h := range []string{"X-Auth-Subject", "X-Auth-Scopes", "X-Auth-Tenant", "X-Auth-Roles"} {
					if _, ok := w.Header()[h]; !ok {
						t.Errorf("header %s absent on 200: a forged copy would survive", h)
					}
				}
			} else {
				var body struct {
					Error            string `json:"error"`
					ErrorDescription string `json:"error_description"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error == "" {
					t.Errorf("error body is not an RFC 6749-style JSON error: %s", w.Body)
				}
				if strings.Contains(w.Body.String(), "eyJ") {
					t.Errorf("error body echoes the token: %s", w.Body)
				}
			}
			for k, v := range tc.headers {
				if got := w.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestForwardAuthRoutes(t *testing.T) {
	f := newFixture(t, []Route{
		{PathPrefix: "/public", Anonymous: true},
		{Host: "admin.example.com", PathPrefix: "/", Scopes: []string{"admin"}},
		{PathPrefix: "/b/", Issuers: []string{issB}},
		{PathPrefix: "/api", Methods: []string{"GET", "HEAD"}, Scopes: []string{"read"}},
		{PathPrefix: "/api", Methods: []string{"POST", "PUT", "DELETE"}, Scopes: []string{"write"}},
	}, "")
	readOnly := sign(t, f.signerA, map[string]any{"scope": "read"})
	cases := []struct {
		name, method, host, uri string
		header                  string // which header carries the URI
		token                   string
		status                  int
	}{
		{"anonymous without token", "GET", "x", "/public/logo.png", "X-Forwarded-Uri", "", 200},
		{"anonymous, nginx header with query", "GET", "x", "/public/a?x=1", "X-Original-Uri", "", 200},
		{"traversal out of the anonymous prefix", "GET", "x", "/public/../api/x", "X-Forwarded-Uri", "", 401},
		{"encoded traversal is refused", "GET", "x", "/public/%2e%2e/api/x", "X-Forwarded-Uri", "", 403},
		{"prefix is whole segments", "GET", "x", "/publicity", "X-Forwarded-Uri", "", 403},
		{"read route", "GET", "x", "/api/orders", "X-Forwarded-Uri", readOnly, 200},
		{"write route needs write", "POST", "x", "/api/orders", "X-Forwarded-Uri", readOnly, 403},
		{"no route for method", "PATCH", "x", "/api/orders", "X-Forwarded-Uri", readOnly, 403},
		{"unknown path", "GET", "x", "/nowhere", "X-Forwarded-Uri", readOnly, 403},
		{"route restricted to issuer B", "GET", "x", "/b/thing", "X-Forwarded-Uri", readOnly, 401},
		{"host route", "GET", "admin.example.com:443", "/users", "X-Forwarded-Uri", readOnly, 403},
		{"bad percent-encoding", "GET", "x", "/api/%zz", "X-Forwarded-Uri", readOnly, 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{"X-Forwarded-Method": tc.method, "X-Forwarded-Host": tc.host, tc.header: tc.uri}
			var auth []string
			if tc.token != "" {
				auth = []string{"Bearer " + tc.token}
			}
			w := f.do(request{auth: auth, headers: hdr})
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d (body %s)", w.Code, tc.status, w.Body)
			}
		})
	}
}

func TestForwardAuthMetrics(t *testing.T) {
	f := newFixture(t, nil, "")
	good := sign(t, f.signerA, nil)
	f.do(request{auth: []string{"Bearer " + good}})
	f.do(request{auth: []string{"Bearer " + good}})
	f.do(request{})
	f.do(request{auth: []string{"Bearer x.y.z"}})
	f.do(request{headers: map[string]string{"X-Forwarded-Uri": "/public/%2e%2e/admin"}}) // refused even without rules
	f.do(request{headers: map[string]string{"X-Forwarded-Uri": "/%c0%ae%c0%ae/admin"}})
	got, err := f.metrics.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`keygate_decisions_total{frontend="forward_auth",reason="",result="allow"}`:              2,
		`keygate_decisions_total{frontend="forward_auth",reason="missing_token",result="deny"}`:  1,
		`keygate_decisions_total{frontend="forward_auth",reason="malformed",result="deny"}`:      1,
		`keygate_decisions_total{frontend="forward_auth",reason="ambiguous_path",result="deny"}`: 2,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

// reviewRoutes are the rules of the security review's example: an anonymous
// prefix, a scoped one and a catch-all.
var reviewRoutes = []Route{
	{PathPrefix: "/public", Anonymous: true},
	{PathPrefix: "/admin", Scopes: []string{"admin"}},
	{PathPrefix: "/"},
}

// TestForwardAuthAmbiguousPaths: a path that common upstreams read in
// different ways (path parameters, encoded dots and slashes, backslashes,
// NUL and control characters, double encoding, bad escapes, invalid UTF-8)
// is refused, whichever rule a lenient reading would pick; one that every
// reading agrees on is decided as before.
func TestForwardAuthAmbiguousPaths(t *testing.T) {
	f := newFixture(t, reviewRoutes, "")
	read := sign(t, f.signerA, map[string]any{"scope": "read"})
	const refused = -1
	cases := []struct {
		uri, token string
		status     int // refused: 403 invalid_request ambiguous_path
	}{
		{"/public/..;/admin/x", "", refused}, // Tomcat: /admin/x
		{"/public/..;/admin/x", read, refused},
		{"/public/..;x=1/admin/x", "", refused},
		{"/public/.;/../admin/x", "", refused},
		{"/public;x/../admin/x", read, refused},
		{"/admin;x/y", read, refused}, // Tomcat: /admin/y; as written, under the catch-all
		{"/admin/users;", read, refused},
		{"/public/x;jsessionid=1", "", refused}, // no rule opts in
		{"/public/%2e%2e/admin/x", "", refused},
		{"/public/%2E%2E/admin/x", "", refused},
		{"/public/.%2e/admin/x", "", refused},
		{"/public/%2e", "", refused},
		{"/public/a%2Eb", "", refused},
		{"/public/%252e%252e/admin/x", "", refused}, // decoded twice: /admin/x
		{"/public/%252E%252e/admin/x", "", refused},
		{"/public/%25252e%25252e/admin/x", "", refused},
		{"/public/..%2Fadmin/x", "", refused},
		{"/public/..%2fadmin/x", "", refused},
		{"/public%2F..%2Fadmin/x", "", refused},
		{"/public/..%5Cadmin/x", "", refused}, // IIS and Windows: \ is /
		{"/public/..%5cadmin/x", "", refused},
		{`/public\..\admin\x`, "", refused},
		{`/public/..\admin`, "", refused},
		{"/public/%00/../admin/x", "", refused},
		{"/public/a%0a", "", refused},
		{"/public/a%09", "", refused},
		{"/public/%3b/../admin", "", refused},
		{"/public/a%3Bb", "", refused},
		{"/public/%zz", "", refused},
		{"/public/%2", "", refused},
		{"/public/%", "", refused},
		{"/public/%c0%ae%c0%ae/admin/x", "", refused}, // overlong UTF-8 for ..
		{"/public/%e0%80%ae", "", refused},
		{"/public/%ff", "", refused},
		{"/public/%ed%a0%80", "", refused}, // a UTF-16 surrogate
		// Read the same way everywhere: decided as before.
		{"/public/x", "", 200},
		{"/public/", "", 200},
		{"/public", "", 200},
		{"/public/a%20b", "", 200},
		{"/public/caf%C3%A9", "", 200},
		{"/public/100%25", "", 200},
		{"/public/a%7Eb%41", "", 200},
		{"/public/a/../b", "", 200},
		{"/public/./b", "", 200},
		{"/public/../admin/x", "", 401},
		{"/public/../admin/x", read, 403},
		{"//admin//x", read, 403},
		{"/admin/", read, 403},
		{"/admin/x/..", read, 403},
		{"/x/../../admin", read, 403},
		{"/publicx/..;/x", read, refused},
		{"/ADMIN/x", read, 200}, // case-sensitive by default: the catch-all
	}
	for _, tc := range cases {
		t.Run(tc.uri, func(t *testing.T) {
			var auth []string
			if tc.token != "" {
				auth = []string{"Bearer " + tc.token}
			}
			w := f.do(request{auth: auth, headers: map[string]string{"X-Forwarded-Uri": tc.uri, "X-Forwarded-Method": "GET"}})
			if tc.status != refused {
				if w.Code != tc.status {
					t.Fatalf("status %d, want %d (body %s)", w.Code, tc.status, w.Body)
				}
				return
			}
			if w.Code != http.StatusForbidden || w.Body.String() != `{"error":"invalid_request","error_description":"ambiguous_path"}` {
				t.Fatalf("got %d %s, want 403 invalid_request ambiguous_path", w.Code, w.Body)
			}
			if h := w.Header().Get("WWW-Authenticate"); h != "" {
				t.Errorf("WWW-Authenticate %q on a refused path", h)
			}
		})
	}
}

// TestForwardAuthHosts: a host rule covers its host with a port, in any
// case, with the trailing dot of a fully qualified name, and as an IPv6
// literal in brackets.
func TestForwardAuthHosts(t *testing.T) {
	f := newFixture(t, []Route{
		{Host: "admin.example.com", Scopes: []string{"admin"}},
		{Host: "[::1]", Scopes: []string{"admin"}},
		{PathPrefix: "/"},
	}, "")
	read := sign(t, f.signerA, map[string]any{"scope": "read"})
	for _, tc := range []struct {
		host   string
		status int
	}{
		{"admin.example.com", 403},
		{"ADMIN.Example.COM:8443", 403},
		{"admin.example.com.", 403},
		{"admin.example.com.:443", 403},
		{"[::1]:8080", 403},
		{"::1", 403},
		{"other.example.com", 200},
	} {
		t.Run(tc.host, func(t *testing.T) {
			w := f.do(request{auth: []string{"Bearer " + read}, headers: map[string]string{"X-Forwarded-Host": tc.host, "X-Forwarded-Uri": "/x"}})
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d (body %s)", w.Code, tc.status, w.Body)
			}
		})
	}
}

// TestForwardAuthPathOptions: a rule's opt-ins let through what it allows,
// only when every reading of the path agrees on that rule; case-insensitive
// rules cover every spelling.
func TestForwardAuthPathOptions(t *testing.T) {
	f := newFixture(t, []Route{
		{PathPrefix: "/public", Anonymous: true, AllowPathParams: true},
		{PathPrefix: "/api", AllowEncodedSlashes: true},
		{PathPrefix: "/admin", Scopes: []string{"admin"}, CaseInsensitive: true},
		{PathPrefix: "/"},
	}, "")
	read := sign(t, f.signerA, map[string]any{"scope": "read"})
	const refused = -1
	for _, tc := range []struct {
		uri, token string
		status     int
	}{
		{"/public/x;jsessionid=1", "", 200},
		{"/public/a/..;/b", "", 200},
		{"/public/..;/admin/x", "", refused},
		{"/admin/..;/public/x", "", refused}, // under /admin as nginx and Go read it
		{"/public;x/y", "", refused},
		{"/api/projects/group%2Fname", read, 200},
		{"/api/projects/group%2Fname", "", 401},
		{"/api%2F..%2Fadmin", read, refused},
		{"/api/..%2Fadmin", read, refused},
		{"/admin%2Fx", read, refused},
		{"/api/x;y", read, refused},
		{"/ADMIN/x", read, 403},
		{"/AdMiN", "", 401},
		{"/x/../Admin/", read, 403},
	} {
		t.Run(tc.uri, func(t *testing.T) {
			var auth []string
			if tc.token != "" {
				auth = []string{"Bearer " + tc.token}
			}
			w := f.do(request{auth: auth, headers: map[string]string{"X-Forwarded-Uri": tc.uri}})
			if tc.status == refused {
				if w.Code != 403 || !strings.Contains(w.Body.String(), `"ambiguous_path"`) {
					t.Fatalf("got %d %s, want 403 ambiguous_path", w.Code, w.Body)
				}
				return
			}
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d (body %s)", w.Code, tc.status, w.Body)
			}
		})
	}
}
