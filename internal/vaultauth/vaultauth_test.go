package vaultauth_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/vaultauth"
	"github.com/keygate/keygate/internal/vaultauth/vaultauthtest"
)

// TestAuthenticate: the token from either header (the same one, once),
// verified, its tenant read; each refusal a 403 naming its problem.
func TestAuthenticate(t *testing.T) {
	s := vaultauthtest.New(t)
	good := s.Token(t, "acme", "kgc_a", "secrets:admin")
	other := s.Token(t, "acme", "kgc_b")
	noTenant := s.Mint(t, mint.Claims{Subject: "kgc_a", TTL: time.Hour})
	badTenant := s.Token(t, "Not A Tenant!", "kgc_a")
	tests := []struct {
		name string
		hdr  http.Header
		code string // "" when accepted
	}{
		{"x-vault-token", http.Header{"X-Vault-Token": {good}}, ""},
		{"bearer", http.Header{"Authorization": {"Bearer " + good}}, ""},
		{"bearer any case", http.Header{"Authorization": {"bEaReR " + good}}, ""},
		{"both the same", http.Header{"Authorization": {"Bearer " + good}, "X-Vault-Token": {good}}, ""},
		{"none", http.Header{}, "no_token"},
		{"empty", http.Header{"X-Vault-Token": {""}}, "no_token"},
		{"basic", http.Header{"Authorization": {"Basic eDp5"}}, "malformed_authorization"},
		{"short", http.Header{"Authorization": {"Bear"}}, "malformed_authorization"},
		{"two authorizations", http.Header{"Authorization": {"Bearer " + good, "Bearer " + good}}, "conflicting_tokens"},
		{"two vault tokens", http.Header{"X-Vault-Token": {good, good}}, "conflicting_tokens"},
		{"different", http.Header{"Authorization": {"Bearer " + good}, "X-Vault-Token": {other}}, "conflicting_tokens"},
		{"garbage", http.Header{"X-Vault-Token": {"garbage"}}, "malformed"},
		{"no tenant", http.Header{"X-Vault-Token": {noTenant}}, "no_tenant"},
		{"bad tenant", http.Header{"X-Vault-Token": {badTenant}}, "no_tenant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, tenant, err := vaultauth.Authenticate(context.Background(), tt.hdr, s.Verifier)
			if tt.code == "" {
				if err != nil || tenant != "acme" || vaultauth.Principal(res) != "kgc_a" {
					t.Fatalf("%v %q %v", res, tenant, err)
				}
				return
			}
			var he *httperr.Error
			if !errors.As(err, &he) || he.Status != http.StatusForbidden || he.Code != tt.code {
				t.Fatalf("err %v, want 403 %s", err, tt.code)
			}
		})
	}
}

// FuzzToken: reading the headers never panics, and a token is returned
// only when one header carries it, or both carry the same.
func FuzzToken(f *testing.F) {
	f.Add("Bearer abc", "abc", false)
	f.Add("bearer  x ", "", true)
	f.Add("", "tok", false)
	f.Fuzz(func(t *testing.T, auth, vt string, omitAuth bool) {
		h := http.Header{"X-Vault-Token": {vt}}
		if !omitAuth {
			h["Authorization"] = []string{auth}
		}
		tok, err := vaultauth.Token(h)
		if err != nil {
			return
		}
		if tok == "" || !omitAuth && vt != "" && tok != vt {
			t.Fatalf("%q %q: token %q", auth, vt, tok)
		}
	})
}
