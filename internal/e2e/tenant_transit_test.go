package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/server"
)

// TestDeleteTenantAfterWrappingKey: a tenant whose transit callers read
// its wrapping key (stored as an internal transit key row) is deleted once
// its clients, users and keys are gone; a key of its own keeps it.
func TestDeleteTenantAfterWrappingKey(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: makes a tenant's RSA-4096 wrapping key; run without -short")
	}
	l := startLive(t, server.Config{AdminToken: auditAdminToken,
		Node: auditNode(filepath.Join(t.TempDir(), "data"), config.Audit{Disabled: true})})
	admin := func(method, path, body string) (int, string) {
		t.Helper()
		resp, b := do(t, method, l.admin+path, body, adminJSON(auditAdminToken))
		return resp.StatusCode, string(b)
	}
	if code, body := admin(http.MethodPost, "/v1/admin/tenants", `{"name":"acme"}`); code != http.StatusCreated {
		t.Fatalf("create tenant: %d %s", code, body)
	}
	code, body := admin(http.MethodPost, "/v1/admin/clients", `{"name":"app","tenant":"acme","scopes":["transit:admin"]}`)
	if code != http.StatusCreated {
		t.Fatalf("create client: %d %s", code, body)
	}
	var c struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatal(err)
	}
	code, tb := tokenStatus(t, l, c.ID, c.Secret)
	if code != http.StatusOK {
		t.Fatalf("token: %d %s", code, tb)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal([]byte(tb), &tok); err != nil {
		t.Fatal(err)
	}
	h := http.Header{"X-Vault-Token": {tok.AccessToken}}
	for _, p := range []string{"/v1/transit/wrapping_key", "/v1/transit/keys/orders"} {
		method := http.MethodGet
		if p == "/v1/transit/keys/orders" {
			method = http.MethodPost
		}
		if resp, b := do(t, method, l.base+p, "", h); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, p, resp.StatusCode, b)
		}
	}
	if code, body := admin(http.MethodDelete, "/v1/admin/clients/"+c.ID, ""); code != http.StatusNoContent {
		t.Fatalf("delete client: %d %s", code, body)
	}
	code, body = admin(http.MethodDelete, "/v1/admin/tenants/acme", "")
	if code != http.StatusConflict || body == "" {
		t.Errorf("delete a tenant holding a key: %d %s", code, body)
	}
	if want := `tenant \"acme\" still holds 0 clients, 0 users, 1 transit key and 0 secrets`; !strings.Contains(body, want) {
		t.Errorf("delete a tenant holding a key: %s, want it to say %s", body, want)
	}
	k, _, err := l.Store().GetTransitKey(t.Context(), "acme", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Store().DeleteTransitKey(t.Context(), "acme", "orders", k.Revision); err != nil {
		t.Fatal(err)
	}
	if code, body := admin(http.MethodDelete, "/v1/admin/tenants/acme", ""); code != http.StatusNoContent {
		t.Errorf("delete a tenant left with its wrapping key only: %d %s", code, body)
	}
}
