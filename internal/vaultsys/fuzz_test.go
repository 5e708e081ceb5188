package vaultsys_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/keygate/keygate/internal/vaultauth/vaultauthtest"
	"github.com/keygate/keygate/internal/vaultsys"
)

// FuzzRequests: any query to sys/health and any path under ui/mounts is
// answered with a status net/http can send and a JSON body, never a panic.
func FuzzRequests(f *testing.F) {
	f.Add("sealedcode=299&standbyok=true", "secret/a/b")
	f.Add("activecode=5", "")
	f.Add("uninitcode=%zz", "\xff/..")
	tokens := vaultauthtest.New(f)
	tok := tokens.Token(f, "default", "kgc_fuzz")
	health := vaultsys.NewHealth(vaultsys.HealthOptions{Version: "1"})
	mounts, err := vaultsys.NewMounts(vaultsys.MountsOptions{Verifier: tokens.Verifier, Mounts: []vaultsys.Mount{vaultsys.KVv2Mount}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, query, path string) {
		for _, c := range []struct {
			h http.Handler
			u *url.URL
		}{{health, &url.URL{Path: vaultsys.HealthPath, RawQuery: query}}, {mounts, &url.URL{Path: vaultsys.UIMountsPrefix + path, RawQuery: query}}} {
			r := &http.Request{Method: http.MethodGet, URL: c.u, Header: http.Header{"X-Vault-Token": {tok}}}
			w := httptest.NewRecorder()
			c.h.ServeHTTP(w, r.WithContext(t.Context()))
			if w.Code < 100 || w.Code > 599 || w.Code == 500 || !json.Valid(w.Body.Bytes()) {
				t.Fatalf("%s: %d %q", c.u, w.Code, w.Body)
			}
		}
	})
}
