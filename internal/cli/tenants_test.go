package cli

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// claimsOf decodes a JWT's claims without verifying it.
func claimsOf(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(strings.TrimSpace(tok), ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTenantsCommands drives tenants, and clients and users in them,
// through the CLI against a running `serve --dev`; what was there before
// tenants (the demo client, its sample token) is the default tenant's.
func TestTenantsCommands(t *testing.T) {
	h := newHarness(t)
	s, admin := h.serveDev(t)
	base := "http://" + s.addr
	out := s.stdout.String()
	demoID, demoSecret := clientIDLine.FindStringSubmatch(out)[1], clientSecretLine.FindStringSubmatch(out)[1]
	if c := claimsOf(t, tokenLine.FindStringSubmatch(out)[1]); c["tenant"] != "default" {
		t.Errorf("the sample token's claims: %v", c)
	}
	adm := func(args ...string) []string { return append(args, admin...) }

	if list := h.must(adm("tenants", "list")...); !strings.HasPrefix(list, "TENANT\tCREATED\ndefault\t") || strings.Count(list, "\n") != 2 {
		t.Errorf("tenants list on a fresh node: %q", list)
	}
	if got := h.must(adm("tenants", "create", "acme")...); got != "tenant=acme\n" {
		t.Errorf("tenants create printed %q", got)
	}
	expect(t, h.run(adm("tenants", "create", "acme")...), ExitFail, "", `409 conflict: tenant "acme" already exists`)
	expect(t, h.run(adm("tenants", "create", "Acme")...), ExitFail, "", `400 invalid_request: tenant name "Acme"`)
	expect(t, h.run(adm("tenants", "create")...), ExitUsage, "", "")
	if list := h.must(adm("tenants", "list")...); !strings.Contains(list, "acme\t") || !strings.Contains(list, "default\t") {
		t.Errorf("tenants list: %q", list)
	}

	// A client and a user of acme: listed with their tenant, filtered
	// exactly, and the client's tokens carry acme.
	created := h.must(adm("clients", "create", "--name", "pay", "--scopes", "transit:encrypt:payments,secrets:read:billing/*", "--tenant", "acme")...)
	id, secret := clientIDLine.FindStringSubmatch(created)[1], clientSecretLine.FindStringSubmatch(created)[1]
	expect(t, h.run(adm("clients", "create", "--name", "x", "--tenant", "nope")...), ExitFail, "", `404 not_found: tenant "nope" does not exist`)
	if list := h.must(adm("clients", "list")...); !strings.Contains(list, "acme\t"+id+"\tpay\ttransit:encrypt:payments secrets:read:billing/*\n") ||
		!strings.Contains(list, "default\t"+demoID+"\tdemo\tdemo\n") {
		t.Errorf("clients list: %q", list)
	}
	if list := h.must(adm("clients", "list", "--tenant", "acme")...); list != "TENANT\tCLIENT_ID\tNAME\tSCOPES\nacme\t"+id+"\tpay\ttransit:encrypt:payments secrets:read:billing/*\n" {
		t.Errorf("clients list --tenant acme: %q", list)
	}
	if list := h.must(adm("clients", "list", "--tenant", "default")...); strings.Contains(list, id) || !strings.Contains(list, demoID) {
		t.Errorf("clients list --tenant default: %q", list)
	}
	expect(t, h.run(adm("clients", "list", "--tenant", "nope")...), ExitFail, "", `tenant "nope" does not exist`)
	var listed struct {
		Clients []struct {
			ID     string `json:"client_id"`
			Tenant string `json:"tenant"`
		} `json:"clients"`
	}
	if err := json.Unmarshal([]byte(h.must(adm("clients", "list", "--tenant", "acme", "--json")...)), &listed); err != nil ||
		len(listed.Clients) != 1 || listed.Clients[0].ID != id || listed.Clients[0].Tenant != "acme" {
		t.Errorf("clients list --json: %+v %v", listed, err)
	}
	tok := h.must("token", "--client", id, "--secret", secret, "--url", base, "--scope", "secrets:read:billing/*")
	if c := claimsOf(t, tok); c["tenant"] != "acme" || c["scope"] != "secrets:read:billing/*" {
		t.Errorf("acme's client's token: %v", c)
	}

	h.stdin = "acme alice's password\n"
	uid := strings.TrimSpace(strings.TrimPrefix(h.must(adm("users", "create", "--username", "alice", "--scopes", "transit:encrypt:payments", "--tenant", "acme")...), "user_id="))
	if list := h.must(adm("users", "list", "--tenant", "acme")...); list != "TENANT\tUSER_ID\tUSERNAME\tSCOPES\tSTATE\nacme\t"+uid+"\talice\ttransit:encrypt:payments\tenabled\n" {
		t.Errorf("users list --tenant acme: %q", list)
	}
	if list := h.must(adm("users", "list", "--tenant", "default")...); list != "TENANT\tUSER_ID\tUSERNAME\tSCOPES\tSTATE\n" {
		t.Errorf("users list --tenant default: %q", list)
	}
	login := url.Values{"username": {"alice"}, "password": {"acme alice's password"}}.Encode()
	code, body := post(t, base+"/v1/login", login, basic(id, secret))
	if code != http.StatusOK {
		t.Fatalf("acme alice through acme's client: %d %s", code, body)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	json.Unmarshal([]byte(body), &tr)
	if c := claimsOf(t, tr.AccessToken); c["tenant"] != "acme" || c["sub"] != uid {
		t.Errorf("acme alice's token: %v", c)
	}
	if code, body := post(t, base+"/v1/login", login, basic(demoID, demoSecret)); code != http.StatusUnauthorized {
		t.Errorf("acme alice through the default demo client: %d %s", code, body)
	}

	// Delete: refused while acme holds anything, and for default.
	expect(t, h.run(adm("tenants", "delete", "acme")...), ExitFail, "", `tenant "acme" still holds 1 client, 1 user, 0 transit keys and 0 secrets`)
	expect(t, h.run(adm("tenants", "delete", "default")...), ExitFail, "", "the default tenant cannot be deleted")
	h.must(adm("clients", "delete", id)...)
	h.must(adm("users", "delete", uid)...)
	h.must(adm("tenants", "delete", "acme")...)
	if list := h.must(adm("tenants", "list")...); strings.Contains(list, "acme") {
		t.Errorf("tenants list after the delete: %q", list)
	}
	expect(t, h.run(adm("tenants", "delete", "acme")...), ExitFail, "", `404 not_found: tenant "acme" does not exist`)
}

// TestTenantsRotateKey: rotate-key rotates a tenant's data key through a
// running node and, with --wait, follows it until the older version is
// retired; --status reports it; a tenant that does not exist is refused.
func TestTenantsRotateKey(t *testing.T) {
	h := newHarness(t)
	_, admin := h.serveDev(t)
	adm := func(args ...string) []string { return append(args, admin...) }
	h.must(adm("tenants", "create", "acme")...)
	if got := h.must(adm("tenants", "rotate-key", "--status", "acme")...); got != "tenant=acme current=0 versions=[] rotation=none\n" {
		t.Errorf("status before any rotation: %q", got)
	}
	got := h.must(adm("tenants", "rotate-key", "--wait", "--rate", "10", "acme")...)
	if !strings.Contains(got, "data key rotation ") || !strings.Contains(got, "version 2 is current") ||
		!strings.Contains(got, "tenant=acme current=2 versions=[2] rotation=done id=") {
		t.Errorf("rotate-key --wait printed %q", got)
	}
	if got := h.must(adm("tenants", "rotate-key", "--status", "acme")...); !strings.HasPrefix(got, "tenant=acme current=2 versions=[2] rotation=done id=") ||
		!strings.Contains(got, " rewrapped=0/0 finished=") {
		t.Errorf("status after the rotation: %q", got)
	}
	expect(t, h.run(adm("tenants", "rotate-key", "zeta")...), ExitFail, "", "404 not_found: no such tenant")
	expect(t, h.run(adm("tenants", "rotate-key", "--rate", "-1", "acme")...), ExitUsage, "", "")
	expect(t, h.run(adm("tenants", "rotate-key")...), ExitUsage, "", "")
}
