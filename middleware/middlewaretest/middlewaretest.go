// Package middlewaretest is the table test every front end of package
// middleware passes: the net/http middleware itself and the framework
// adapters (middleware/gin, middleware/echo, middleware/fiber), each in its
// own module. Run builds a Middleware over keys it generates (ES256, RS256,
// EdDSA and HS256 issuers; no network), puts the adapter under test in front
// of an application handler, and sends it the same requests: valid tokens,
// missing and malformed credentials, expired tokens, wrong audience and
// issuer, algorithm confusion, a missing scope, an oversized token, forged
// claim headers. For each it checks the status, the WWW-Authenticate
// challenge and the body, byte for byte against both the expected answer and
// the net/http middleware's, and that the application handler ran only for
// requests let through, seeing the token's identity.
package middlewaretest

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/jose"
	"github.com/keygate/keygate/middleware"
)

// App is the application handler behind the adapter under test. The
// adapter's handler calls it with the identity its framework's accessor
// returns and the one middleware.FromContext finds in the request context
// (nil where there is none) and answers 200 with the body it returns.
type App func(fromFramework, fromContext *middleware.Identity) string

// Serve builds the handler under test: the adapter over mw, demanding every
// scope in scopes, in front of app.
type Serve func(mw *middleware.Middleware, scopes []string, app App) http.Handler

// NetHTTP is the Serve of the net/http middleware: mw.Require(scopes...)
// in front of app, both identities taken from the request context.
func NetHTTP(mw *middleware.Middleware, scopes []string, app App) http.Handler {
	return mw.Require(scopes...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := middleware.FromContext(r.Context())
		w.Write([]byte(app(id, id)))
	}))
}

// Audience is the audience every issuer of Run's Middleware demands.
const Audience = "orders"

// Issuers of Run's Middleware, one per algorithm, each allowing only its own.
const (
	IssuerES256 = "https://es256.test/"
	IssuerRS256 = "https://rs256.test/"
	IssuerEdDSA = "https://eddsa.test/"
	IssuerHS256 = "https://hs256.test/"
)

type testKeys struct {
	es, rs, ed, hs *jose.Signer
	rsPublicPEM    []byte
	stranger       *jose.Signer // an ES256 key no issuer trusts, with es's kid
}

var (
	keysOnce sync.Once
	keys     testKeys
	keysErr  error
)

// generated makes the keys once per test binary: an RSA key takes a while
// under -race.
func generated(t *testing.T) testKeys {
	t.Helper()
	keysOnce.Do(func() {
		must := func(s *jose.Signer, err error) *jose.Signer {
			if err != nil && keysErr == nil {
				keysErr = err
			}
			return s
		}
		ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		sk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		rk, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			keysErr = err
			return
		}
		_, edk, _ := ed25519.GenerateKey(rand.Reader)
		secret := make([]byte, 32)
		rand.Read(secret)
		der, err := x509.MarshalPKIXPublicKey(&rk.PublicKey)
		if err != nil {
			keysErr = err
			return
		}
		keys = testKeys{
			es:          must(jose.NewSigner(jose.ES256, "es", ek)),
			rs:          must(jose.NewSigner(jose.RS256, "rs", rk)),
			ed:          must(jose.NewSigner(jose.EdDSA, "ed", edk)),
			hs:          must(jose.NewSigner(jose.HS256, "hs", secret)),
			rsPublicPEM: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
			stranger:    must(jose.NewSigner(jose.ES256, "es", sk)),
		}
	})
	if keysErr != nil {
		t.Fatalf("middlewaretest: generating keys: %v", keysErr)
	}
	return keys
}

// New returns a Middleware over the test keys: one issuer per algorithm
// (IssuerES256, ...), each demanding Audience. It is closed when t ends.
func New(t *testing.T) *middleware.Middleware {
	t.Helper()
	k := generated(t)
	issuer := func(iss string, s *jose.Signer, alg jose.Alg) middleware.Issuer {
		return middleware.Issuer{Issuer: iss, Keys: jose.NewKeySet(s.Key()), Algorithms: []jose.Alg{alg},
			Audiences: []string{Audience}}
	}
	mw, err := middleware.New(context.Background(), middleware.Config{Issuers: []middleware.Issuer{
		issuer(IssuerES256, k.es, jose.ES256),
		issuer(IssuerRS256, k.rs, jose.RS256),
		issuer(IssuerEdDSA, k.ed, jose.EdDSA),
		issuer(IssuerHS256, k.hs, jose.HS256),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mw.Close)
	return mw
}

// Reply is the body Run's application handler answers with for identity
// id: "sub=... iss=... scope=...".
func Reply(id *middleware.Identity) string {
	return "sub=" + id.Subject + " iss=" + id.Issuer + " scope=" + id.Scope
}

func sign(t *testing.T, s *jose.Signer, claims map[string]any) string {
	t.Helper()
	tok, err := s.SignClaims(claims)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func claims(iss string, extra ...any) map[string]any {
	c := map[string]any{"iss": iss, "sub": "alice", "aud": Audience, "exp": time.Now().Add(time.Hour).Unix(),
		"scope": "orders:read"}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

// challenge and body are the WWW-Authenticate value and the body of a
// refusal with code and description.
func challenge(code, description string) string {
	return `Bearer realm="keygate", error="` + code + `", error_description="` + description + `"`
}

func body(code, description string) string {
	return `{"error":"` + code + `","error_description":"` + description + `"}`
}

type testCase struct {
	name      string
	scopes    []string
	auth      []string    // Authorization header values
	extra     http.Header // other request headers
	status    int
	challenge string
	body      string
}

func cases(t *testing.T) []testCase {
	k := generated(t)
	bearer := func(tok string) []string { return []string{"Bearer " + tok} }
	refused := func(name string, auth []string, status int, code, description string) testCase {
		return testCase{name: name, auth: auth, status: status, challenge: challenge(code, description),
			body: body(code, description)}
	}
	confused, err := jose.NewSigner(jose.HS256, "rs", k.rsPublicPEM)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	none := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64([]byte(`{"iss":"`+IssuerES256+`","sub":"alice","aud":"orders"}`)) + "."
	huge := sign(t, k.es, claims(IssuerES256, "pad", strings.Repeat("x", 9<<10)))
	missing := testCase{name: "missing token", status: 401, challenge: `Bearer realm="keygate"`,
		body: body("unauthorized", "a bearer token is required")}
	basic := missing
	basic.name, basic.auth = "other scheme", []string{"Basic YWxpY2U6c2VjcmV0"}
	// "Bearer " with no token arrives as "Bearer": servers reading from a
	// connection, net/http's and fasthttp's, drop trailing white space.
	bare := missing
	bare.name, bare.auth = "Bearer without a token", []string{"Bearer"}
	insufficient := refused("missing scope", bearer(sign(t, k.es, claims(IssuerES256))), 403,
		"insufficient_scope", "insufficient_scope")
	insufficient.scopes = []string{"orders:write"}
	ok := func(name string, s *jose.Signer, iss string, scopes []string, extra ...any) testCase {
		c := claims(iss, extra...)
		return testCase{name: name, scopes: scopes, auth: bearer(sign(t, s, c)), status: 200,
			body: "sub=alice iss=" + iss + " scope=" + c["scope"].(string)}
	}
	// Other spellings of the header, each decided as forward-auth, the
	// proxy and ext_authz decide it: the scheme in any case, spaces
	// before the token; a tab is no separator, and two tokens joined in
	// one header (as proxies join repeated headers) are one malformed
	// token, never the first of them.
	token := sign(t, k.es, claims(IssuerES256))
	spelled := func(name, auth string) testCase {
		c := ok(name, k.es, IssuerES256, nil)
		c.auth = []string{auth}
		return c
	}
	tab := missing
	tab.name, tab.auth = "a tab after the scheme", []string{"Bearer\t" + token}
	forged := ok("forged claim headers", k.es, IssuerES256, nil)
	forged.extra = http.Header{"X-Auth-Subject": {"mallory"}, "X-Forwarded-User": {"mallory"},
		"X-Keygate-Subject": {"mallory"}, "X-Auth-Scope": {"orders:write"}}
	return []testCase{
		ok("valid ES256", k.es, IssuerES256, nil),
		ok("valid RS256", k.rs, IssuerRS256, nil),
		ok("valid EdDSA", k.ed, IssuerEdDSA, nil),
		ok("valid HS256", k.hs, IssuerHS256, nil),
		ok("scope present", k.es, IssuerES256, []string{"orders:write", "orders:read"}, "scope", "orders:read orders:write"),
		forged,
		missing,
		basic,
		bare,
		refused("two Authorization headers", append(bearer(sign(t, k.es, claims(IssuerES256))), "Bearer x"), 401,
			"invalid_request", "more than one Authorization header"),
		spelled("the scheme in lower case", "bearer "+token),
		spelled("the scheme in upper case", "BEARER "+token),
		spelled("two spaces after the scheme", "Bearer  "+token),
		tab,
		refused("two tokens in one header", []string{"Bearer " + token + ", Bearer " + token}, 401, "invalid_token", "malformed"),
		refused("malformed token", bearer("not-a-jwt"), 401, "invalid_token", "malformed"),
		refused("expired", bearer(sign(t, k.es, claims(IssuerES256, "exp", time.Now().Add(-time.Hour).Unix()))), 401,
			"invalid_token", "expired"),
		refused("wrong audience", bearer(sign(t, k.es, claims(IssuerES256, "aud", "billing"))), 401,
			"invalid_token", "wrong_audience"),
		refused("untrusted issuer", bearer(sign(t, k.es, claims("https://evil.test/"))), 401,
			"invalid_token", "wrong_issuer"),
		refused("key of no issuer", bearer(sign(t, k.stranger, claims(IssuerES256))), 401,
			"invalid_token", "bad_signature"),
		refused("HS256 with the RS256 public key as secret", bearer(sign(t, confused, claims(IssuerRS256))), 401,
			"invalid_token", "unsupported_alg"),
		refused("alg none", bearer(none), 401, "invalid_token", "unsupported_alg"),
		insufficient,
		refused("oversized token", bearer(huge), 401, "invalid_token", "too_large"),
	}
}

// Run sends every case to the handler serve builds and to the net/http
// middleware, and checks that both answer as expected, alike.
func Run(t *testing.T, serve Serve) {
	t.Helper()
	mw := New(t)
	for _, tc := range cases(t) {
		t.Run(tc.name, func(t *testing.T) {
			var ran atomic.Int32
			app := func(fromFramework, fromContext *middleware.Identity) string {
				ran.Add(1)
				switch {
				case fromFramework == nil:
					return "no identity from the framework's accessor"
				case fromContext == nil:
					return "no identity in the request context"
				case fromFramework != fromContext:
					return "the framework's identity is not the request context's"
				}
				return Reply(fromFramework)
			}
			got := do(serve(mw, tc.scopes, app), tc)
			if n := ran.Load(); tc.status == http.StatusOK && n != 1 {
				t.Errorf("application handler ran %d times, want once", n)
			} else if tc.status != http.StatusOK && n != 0 {
				t.Errorf("application handler ran on a refused request")
			}
			want := do(NetHTTP(mw, tc.scopes, func(id, _ *middleware.Identity) string { return Reply(id) }), tc)
			check(t, "adapter", got, tc)
			check(t, "net/http middleware", want, tc)
			if tc.status != http.StatusOK {
				for _, h := range []string{"Www-Authenticate", "Content-Type", "Cache-Control"} {
					if g, w := got.Header().Values(h), want.Header().Values(h); strings.Join(g, "\n") != strings.Join(w, "\n") {
						t.Errorf("%s: adapter %q, net/http middleware %q", h, g, w)
					}
				}
			}
		})
	}
}

func do(h http.Handler, tc testCase) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "http://api.test/orders/7", nil)
	for k, v := range tc.extra {
		r.Header[k] = v
	}
	if tc.auth != nil {
		r.Header["Authorization"] = tc.auth
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func check(t *testing.T, who string, got *httptest.ResponseRecorder, tc testCase) {
	t.Helper()
	if got.Code != tc.status {
		t.Errorf("%s: status %d, want %d (body %q)", who, got.Code, tc.status, got.Body)
	}
	if b := got.Body.String(); b != tc.body {
		t.Errorf("%s: body %q, want %q", who, b, tc.body)
	}
	if c := strings.Join(got.Header().Values("Www-Authenticate"), "\n"); c != tc.challenge {
		t.Errorf("%s: WWW-Authenticate %q, want %q", who, c, tc.challenge)
	}
	if tc.status == http.StatusOK {
		return
	}
	if c := got.Header().Get("Content-Type"); c != "application/json" {
		t.Errorf("%s: Content-Type %q, want application/json", who, c)
	}
	if c := got.Header().Get("Cache-Control"); c != "no-store" {
		t.Errorf("%s: Cache-Control %q, want no-store", who, c)
	}
}
