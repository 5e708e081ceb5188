package cli

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEProxySnippets checks that the proxy blocks in the README are
// what `keygate config` prints for the built-in configuration: the blocks
// the real-proxy tests run.
func TestREADMEProxySnippets(t *testing.T) {
	readme, err := os.ReadFile("../../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, proxy := range []string{"nginx", "caddy", "traefik"} {
		out := newHarness(t).must("config", proxy)
		if !strings.Contains(string(readme), "\n"+out+"```") {
			t.Errorf("docs/gateway.md does not hold `keygate config %s` as a whole code block; it prints:\n%s", proxy, out)
		}
	}
}

// TestProxyConfigFromFile checks that the blocks follow the configuration:
// every issuer's claim headers, and where keygate listens.
func TestProxyConfigFromFile(t *testing.T) {
	h := newHarness(t)
	cfg := h.write("keygate.yaml", []byte(`
listen: 0.0.0.0:7000
issuers:
  - issuer: https://a.example/
    key_files: [a.pem]
    algorithms: [ES256]
    headers: {X-User: sub, x-tenant: tenant}
  - issuer: https://b.example/
    key_files: [b.pem]
    algorithms: [ES256]
`))
	nginx := h.must("config", "nginx", "--config", cfg, "--app", "app:80")
	for _, want := range []string{
		"proxy_pass http://127.0.0.1:7000/auth;", // 0.0.0.0 is reached on loopback
		"proxy_set_header X-User $keygate_x_user;", "proxy_set_header X-Tenant $keygate_x_tenant;",
		"proxy_set_header X-Auth-Scopes $keygate_x_auth_scopes;", // issuer b maps the defaults
		"proxy_pass http://app:80;",
	} {
		if !strings.Contains(nginx, want) {
			t.Errorf("nginx block lacks %q:\n%s", want, nginx)
		}
	}
	caddy := h.must("config", "caddy", "--config", cfg, "--keygate", "kg:8080")
	for _, want := range []string{"request_header -X-User\n", "forward_auth kg:8080 {",
		"copy_headers X-Auth-Issuer X-Auth-Scopes X-Auth-Subject X-Tenant X-User\n"} {
		if !strings.Contains(caddy, want) {
			t.Errorf("caddy block lacks %q:\n%s", want, caddy)
		}
	}
	traefik := h.must("config", "traefik", "--config", cfg)
	if !strings.Contains(traefik, "          - X-Tenant\n") || !strings.Contains(traefik, "address: http://127.0.0.1:7000/auth") {
		t.Errorf("traefik block:\n%s", traefik)
	}
}

func TestProxyConfigRefusesUncopyableHeader(t *testing.T) {
	h := newHarness(t)
	cfg := h.write("keygate.yaml", []byte(`
issuers:
  - {issuer: https://a.example/, key_files: [a.pem], algorithms: [ES256], headers: {X_User: sub}}
`))
	r := h.run("config", "nginx", "--config", cfg)
	expect(t, r, ExitFail, "", "letters, digits and '-'")
}
