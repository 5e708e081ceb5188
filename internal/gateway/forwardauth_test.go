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

	"github.com/keygate/keygate/internal/keys"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/verify"
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

func newSigner(t *testing.T, kid string) *jose.Signer {
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

func newFixture(t *testing.T, routes []Route, cookie string) *fixture {
	t.Helper()
	return newFixtureWith(t, routes, cookie, Forwarding{})
}

// newFixtureWith is newFixture behind a given forwarding preset.
func newFixtureWith(t *testing.T, routes []Route, cookie string, fwd Forwarding) *fixture {
	t.Helper()
	f := &fixture{signerA: newSigner(t, "a1"), signerB: newSigner(t, "b1"), metrics: telemetry.New()}
	headers := []verify.HeaderMapping{{Header: "X-Auth-Subject", Claim: "sub"}, {Header: "X-Auth-Scopes", Claim: "scope"},
		{Header: "X-Auth-Tenant", Claim: "tenant"}, {Header: "X-Auth-Roles", Claim: "realm_access.roles"}}
	p, err := verify.New(verify.Config{
		Policies: []verify.Policy{
			{Issuer: issA, Keys: keys.NewStatic(jose.NewKeySet(f.signerA.Key())), Algorithms: []jose.Alg{jose.ES256},
				Audiences: []string{"api"}, Headers: headers},
			{Issuer: issB, Keys: keys.NewStatic(jose.NewKeySet(f.signerB.Key())), Algorithms: []jose.Alg{jose.ES256},
				Headers: headers[:1], Scopes: []string{"b:use"}},
		},
		Now: func() time.Time { return testNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.handler, err = NewForwardAuth(ForwardAuthConfig{Verifier: p, Routes: routes, Cookie: cookie, Forwarding: fwd,
		Headers: []string{"X-Auth-Subject", "X-Auth-Scopes", "x-auth-tenant", "X-Auth-Roles"},
		Metrics: f.metrics.Decisions(telemetry.FrontForwardAuth, nil)})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func sign(t *testing.T, s *jose.Signer, claims map[string]any) string {
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
		{"encoded traversal", "GET", "x", "/public/%2e%2e/api/x", "X-Forwarded-Uri", "", 401},
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
	mfs, err := f.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "keygate_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + ","
			}
			got[key] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"frontend=forward_auth,reason=,result=allow,":             2,
		"frontend=forward_auth,reason=missing_token,result=deny,": 1,
		"frontend=forward_auth,reason=malformed,result=deny,":     1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
