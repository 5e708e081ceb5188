package cli

import (
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestClientsAndToken drives a running `serve --dev` with the client
// commands and `keygate token --client --secret`, as an operator would.
func TestClientsAndToken(t *testing.T) {
	h := newHarness(t)
	s, admin := h.serveDev(t)
	adminURL := admin[1]

	out := h.must(append([]string{"clients", "create", "--name", "billing", "--scopes", "orders:read,orders:write"}, admin...)...)
	idm, secm := clientIDLine.FindStringSubmatch(out), clientSecretLine.FindStringSubmatch(out)
	if idm == nil || secm == nil {
		t.Fatalf("clients create printed %q", out)
	}
	id, secret := idm[1], secm[1]
	if list := h.must(append([]string{"clients", "list"}, admin...)...); !strings.Contains(list, id+"\tbilling\torders:read orders:write") || strings.Contains(list, secret) {
		t.Errorf("clients list: %q", list)
	}

	tok := strings.TrimSpace(h.must("token", "--client", id, "--secret", secret, "--url", "http://"+s.addr, "--scope", "orders:read"))
	resp := get(t, "http://"+s.addr+"/auth", tok)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Auth-Subject") != id || resp.Header.Get("X-Auth-Scopes") != "orders:read" {
		t.Fatalf("/auth with the fetched token: %d %v", resp.StatusCode, resp.Header)
	}

	rot := h.must(append([]string{"clients", "rotate", id}, admin...)...)
	newSecret := clientSecretLine.FindStringSubmatch(rot)
	if newSecret == nil {
		t.Fatalf("rotate printed %q", rot)
	}
	if r := h.run("token", "--client", id, "--secret", secret, "--url", "http://"+s.addr); r.code != ExitFail || !strings.Contains(r.stderr, "invalid_client") {
		t.Errorf("old secret after rotation: %d %s", r.code, r.stderr)
	}
	h.must("token", "--client", id, "--secret", newSecret[1], "--url", "http://"+s.addr)
	h.must(append([]string{"clients", "update", "--name", "billing-v2", "--scopes", "orders:read", id}, admin...)...)
	if list := h.must(append([]string{"clients", "list"}, admin...)...); !strings.Contains(list, id+"\tbilling-v2\torders:read\n") {
		t.Errorf("clients list after update: %q", list)
	}
	if r := h.run("token", "--client", id, "--secret", newSecret[1], "--scope", "orders:write", "--url", "http://"+s.addr); r.code != ExitFail || !strings.Contains(r.stderr, "invalid_scope") {
		t.Errorf("a removed scope after clients update: %d %s", r.code, r.stderr)
	}
	expect(t, h.run(append([]string{"clients", "update", id}, admin...)...), ExitUsage, "", "nothing to change")
	h.must(append([]string{"clients", "delete", id}, admin...)...)
	if r := h.run("token", "--client", id, "--secret", newSecret[1], "--url", "http://"+s.addr); r.code != ExitFail {
		t.Errorf("deleted client got a token: %d", r.code)
	}

	// Usage and authentication errors.
	if r := h.run("token", "--client", id); r.code != ExitUsage {
		t.Errorf("token without secret: %d", r.code)
	}
	if r := h.run("clients", "create", "--name", "x", "--admin", adminURL, "--admin-token-file", h.path("nope")); r.code != ExitFail {
		t.Errorf("missing admin token file: %d", r.code)
	}
	bad := h.path("bad.token")
	if err := os.WriteFile(bad, []byte(strings.Repeat("x", 40)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := h.run("clients", "list", "--admin", adminURL, "--admin-token-file", bad); r.code != ExitFail || !strings.Contains(r.stderr, "401") {
		t.Errorf("wrong admin token: %d %s", r.code, r.stderr)
	}
	// token sign etc. still work as subcommands of the same group.
	if r := h.run("token", "inspect", tok); r.code != ExitOK {
		t.Errorf("token inspect: %d %s", r.code, r.stderr)
	}
}

// TestScopeSpellings: --scope and --scopes are one flag, comma- or
// space-separated, on keygate token and on clients create alike.
func TestScopeSpellings(t *testing.T) {
	h := newHarness(t)
	s, admin := h.serveDev(t)
	out := h.must(append([]string{"clients", "create", "--name", "svc", "--scope", "orders:read orders:write"}, admin...)...)
	id, secret := clientIDLine.FindStringSubmatch(out)[1], clientSecretLine.FindStringSubmatch(out)[1]
	if list := h.must(append([]string{"clients", "list"}, admin...)...); !strings.Contains(list, id+"\tsvc\torders:read orders:write") {
		t.Errorf("clients create --scope \"a b\": %q", list)
	}
	for _, flag := range []string{"--scopes", "--scope"} {
		tok := strings.TrimSpace(h.must("token", "--client", id, "--secret", secret, "--url", "http://"+s.addr, flag, "orders:read,orders:write"))
		resp := get(t, "http://"+s.addr+"/auth", tok)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Auth-Scopes") != "orders:read orders:write" {
			t.Errorf("token %s a,b: %d %v", flag, resp.StatusCode, resp.Header)
		}
	}
}
