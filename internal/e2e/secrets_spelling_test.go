package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/testnet"
)

// TestSecretSpellingsStayOwn: a spelling of a KV path with dot or empty
// segments before the mount, or a mount of keygate's Vault APIs without
// its slash, is keygate's: never forwarded by a catch-all route to the upstream with
// the client's token (X-Vault-Token) and the secret it writes.
func TestSecretSpellingsStayOwn(t *testing.T) {
	l, reached := startBehindCatchAll(t)
	tok, err := l.Node.Mint(mint.Claims{Subject: "c", Audience: []string{testAudience}, Scope: "secrets:write:* secrets:read:*",
		TTL: time.Hour, Extra: map[string]json.RawMessage{"tenant": json.RawMessage(`"default"`)}})
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(l.base, "http://")
	const body = `{"data":{"password":"hunter2"}}`
	send := func(target string) (int, http.Header, string) {
		return testnet.Exchange(t, addr, "POST "+target+" HTTP/1.1\r\nHost: api.example\r\nX-Vault-Token: "+tok+
			"\r\nContent-Type: application/json\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body)
	}
	if st, _, b := send("/v1/secret/data/app/db"); st != http.StatusOK || !strings.Contains(b, `"version":1`) {
		t.Fatalf("/v1/secret/data/app/db: %d %s", st, b)
	}
	for _, tc := range []struct{ target, location string }{
		{"//v1/secret/data/app/db", "/v1/secret/data/app/db"},
		{"/v1//secret/data/app/db", "/v1/secret/data/app/db"},
		{"/./v1/secret/data/app/db", "/v1/secret/data/app/db"},
		{"/x/../v1/secret/data/app/db", "/v1/secret/data/app/db"},
		{"/v1/x/../secret/data/app/db", "/v1/secret/data/app/db"},
		{"http://api.example//v1/secret/data/app/db", "/v1/secret/data/app/db"},
		{"/v1/secret", "/v1/secret/"},
		{"/v1/./secret", "/v1/secret/"},
		{"/v1//totp/keys/k", "/v1/totp/keys/k"},
		{"/v1/totp", "/v1/totp/"},
		{"/v1/transit", "/v1/transit/"},
		{"/v1/sys/internal/ui/mounts", "/v1/sys/internal/ui/mounts/"},
		{"/v1/x/%2e%2e/secret/data/app/db", ""}, // no path of keygate's: 404
	} {
		st, h, b := send(tc.target)
		switch {
		case tc.location == "" && st != http.StatusNotFound:
			t.Errorf("%s: %d %q, want keygate's 404", tc.target, st, b)
		case tc.location != "" && (st != http.StatusTemporaryRedirect || h.Get("Location") != tc.location):
			t.Errorf("%s: %d, Location %q, %q; want a redirect to %s", tc.target, st, h.Get("Location"), b, tc.location)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d secret requests reached the upstream", n)
	}
	if st, _, b := send("/v1/secretx"); st != http.StatusOK || b != "upstream" {
		t.Errorf("/v1/secretx: %d %q, want the upstream", st, b)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
