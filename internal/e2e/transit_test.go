package e2e

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
)

// TestTransitServed: a node with a token service serves Vault's transit
// API on its traffic handler, to its own tokens; a gateway-only node does
// not serve it (the path is no keygate path there), and a token of an
// issuer the gateway trusts is not the token service's: refused.
func TestTransitServed(t *testing.T) {
	signer := ecSigner(t, "idp-key")
	kf := newKeyFile(t, signer)
	gw := &config.Config{Issuers: []config.Issuer{{Issuer: idpIssuer, KeyFiles: []string{kf.path}, Algorithms: []string{"ES256"},
		Audiences: []string{"api"}}}}
	gw.SetDefaults()
	idpToken, err := mint.Sign(signer, mint.Claims{Issuer: idpIssuer, Subject: "u", Audience: []string{"api"},
		Scope: "transit:random", TTL: time.Hour, Extra: map[string]json.RawMessage{"tenant": json.RawMessage(`"default"`)}}, time.Now(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	send := func(h http.Handler, tok string) (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v1/transit/random", nil)
		req.Header.Set("X-Vault-Token", tok)
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}

	only, err := server.New(t.Context(), server.Config{Gateway: gw})
	if err != nil {
		t.Fatal(err)
	}
	defer only.Close()
	if st, body := send(only.Handler(), idpToken); st != http.StatusNotFound || strings.Contains(body, "errors") {
		t.Errorf("gateway-only node: %d %s", st, body)
	}

	withNode, err := server.New(t.Context(), server.Config{Gateway: gw,
		Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer withNode.Close()
	own, err := withNode.Node().Mint(mint.Claims{Subject: "c", Audience: []string{testAudience}, Scope: "transit:random", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if st, body := send(withNode.Handler(), own); st != http.StatusOK || !strings.Contains(body, `"random_bytes"`) {
		t.Errorf("the node's own token: %d %s", st, body)
	}
	if st, body := send(withNode.Handler(), idpToken); st != http.StatusForbidden || !strings.HasPrefix(body, `{"errors":["permission denied: token refused: `) {
		t.Errorf("a trusted identity provider's token: %d %s", st, body)
	}
}
