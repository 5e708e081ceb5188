package middleware_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/jose"
	"github.com/keygate/keygate/middleware"
)

func signer(t *testing.T) *jose.Signer {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	s, err := jose.NewSigner(jose.ES256, "k1", k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func token(t *testing.T, s *jose.Signer, iss string, extra map[string]any) string {
	t.Helper()
	c := map[string]any{"iss": iss, "sub": "alice", "aud": "orders", "exp": time.Now().Add(time.Hour).Unix(), "scope": "orders:read"}
	for k, v := range extra {
		c[k] = v
	}
	tok, err := s.SignClaims(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestMiddleware(t *testing.T) {
	remote, fixed := signer(t), signer(t)
	jwks, _ := jose.NewKeySet(remote.Key()).MarshalJSON()
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(jwks) }))
	defer idp.Close()

	mw, err := middleware.New(context.Background(), middleware.Config{Issuers: []middleware.Issuer{
		{Issuer: "https://remote.test/", JWKSURL: idp.URL, Algorithms: []jose.Alg{jose.ES256}, Audiences: []string{"orders"}},
		{Issuer: "fixed", Keys: jose.NewKeySet(fixed.Key()), Algorithms: []jose.Alg{jose.ES256}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := middleware.FromContext(r.Context())
		if !ok {
			http.Error(w, "no identity", 500)
			return
		}
		roles, _ := id.Token.Claims.Raw("roles")
		fmt.Fprintf(w, "%s@%s scope=%q roles=%s", id.Subject, id.Issuer, id.Scope, roles)
	})
	mux := http.NewServeMux()
	mux.Handle("/read", mw.Handler(app))
	mux.Handle("/write", mw.Require("orders:write")(app))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	cases := []struct {
		name, path, tok string
		status          int
		want            string
	}{
		{"remote JWKS issuer", "/read", token(t, remote, "https://remote.test/", map[string]any{"roles": []string{"a"}}), 200, `alice@https://remote.test/ scope="orders:read" roles=["a"]`},
		{"fixed-key issuer", "/read", token(t, fixed, "fixed", nil), 200, `alice@fixed`},
		{"key of the other issuer", "/read", token(t, fixed, "https://remote.test/", nil), 401, "invalid_token"},
		{"expired", "/read", token(t, remote, "https://remote.test/", map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}), 401, "expired"},
		{"missing token", "/read", "", 401, "unauthorized"},
		{"scope required", "/write", token(t, remote, "https://remote.test/", nil), 403, "insufficient_scope"},
		{"scope present", "/write", token(t, remote, "https://remote.test/", map[string]any{"scope": "orders:read orders:write"}), 200, "alice@"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
			if tc.tok != "" {
				req.Header.Set("Authorization", "Bearer "+tc.tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
				t.Fatalf("got %d %q, want %d containing %q", resp.StatusCode, body, tc.status, tc.want)
			}
		})
	}

	if _, err := mw.Verify(context.Background(), "junk"); middleware.Reason(err) != "malformed" {
		t.Errorf("Verify(junk): %v", err)
	}
}

func TestMiddlewareConfigErrors(t *testing.T) {
	s := signer(t)
	for name, cfg := range map[string]middleware.Config{
		"no issuers":    {},
		"no key source": {Issuers: []middleware.Issuer{{Issuer: "x", Algorithms: []jose.Alg{jose.ES256}}}},
		"two sources":   {Issuers: []middleware.Issuer{{Issuer: "x", JWKSURL: "https://x/", Keys: jose.NewKeySet(s.Key()), Algorithms: []jose.Alg{jose.ES256}}}},
		"no algorithms": {Issuers: []middleware.Issuer{{Issuer: "x", Keys: jose.NewKeySet(s.Key())}}},
		"plain http":    {Issuers: []middleware.Issuer{{Issuer: "x", JWKSURL: "http://idp.example.com/jwks", Algorithms: []jose.Alg{jose.ES256}}}},
	} {
		t.Run(name, func(t *testing.T) {
			if mw, err := middleware.New(context.Background(), cfg); err == nil {
				mw.Close()
				t.Fatal("accepted")
			}
		})
	}
}
