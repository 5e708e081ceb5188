package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/gateway"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
)

// TestREADMEEnvoyHTTPBlock: the README's ext_authz http_service filter is a
// valid Envoy v3 ExtAuthz, and keygate under --proxy envoy answers the
// check requests that filter makes as /auth answers any proxy: decided on
// the path after path_prefix, for the request's own Host, with the claim
// headers Envoy copies upstream all keygate's.
func TestREADMEEnvoyHTTPBlock(t *testing.T) {
	ea := readmeEnvoyHTTPFilter(t)
	hs := ea.GetHttpService()
	if ea.GetFailureModeAllow() || ea.GetTransportApiVersion().String() != "V3" || hs == nil || hs.GetPathPrefix() != "/auth" || ea.GetWithRequestBody() != nil {
		t.Fatalf("filter fields: failure_mode_allow %v, version %v, http_service %v, with_request_body %v",
			ea.GetFailureModeAllow(), ea.GetTransportApiVersion(), hs, ea.GetWithRequestBody())
	}
	allowed := envoyAllowedHeaders(t, ea)
	// Every spelling of a method override header, '_' for any '-' (Envoy
	// passes those on by default, and CGI-style applications read them).
	names := []string{"authorization"}
	for _, h := range gateway.MethodOverrideHeaders {
		names = append(names, underscoreSpellings(strings.ToLower(h))...)
	}
	for _, h := range names {
		if !allowed(h) {
			t.Errorf("allowed_headers lacks %s: keygate would not see it", h)
		}
	}
	upstream := map[string]bool{}
	for _, p := range hs.GetAuthorizationResponse().GetAllowedUpstreamHeaders().GetPatterns() {
		upstream[strings.ToLower(p.GetExact())] = true
	}

	gw := &config.Config{ForwardAuth: config.Forward{Proxy: "envoy", Rules: []config.Route{
		{PathPrefix: "/public", Anonymous: true}, {PathPrefix: "/admin", Scopes: []string{"admin"}}, {PathPrefix: "/"}}}}
	gw.SetDefaults()
	l := startLive(t, server.Config{Gateway: gw,
		Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience, Dev: true}})
	b := l.Bootstrap()
	tok := clientToken(t, l.base, b.DemoClientID, b.DemoClientSecret)
	for _, c := range []struct {
		name, path, token string
		want              int
	}{
		{"token", "/orders/7", tok, http.StatusOK},
		{"no token", "/orders/7", "", http.StatusUnauthorized},
		{"anonymous rule", "/public/logo.png", "", http.StatusOK},
		{"missing scope", "/admin/users", tok, http.StatusForbidden},
	} {
		// What Envoy sends: the method and Host of the client's request,
		// path_prefix + its path, and only the allowed headers.
		client := http.Header{"Authorization": {"Bearer " + c.token}, "X-Auth-Subject": {"forged"}, "X-Forwarded-Uri": {"/public/x"}}
		if c.token == "" {
			client.Del("Authorization")
		}
		h := http.Header{}
		for k, v := range client {
			if allowed(k) {
				h[k] = v
			}
		}
		req, _ := http.NewRequest(http.MethodGet, l.base+hs.GetPathPrefix()+c.path, nil)
		req.Header = h
		req.Host = "api.example.com"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
			continue
		}
		if c.want != http.StatusOK {
			if resp.Header.Get("Www-Authenticate") == "" && c.want == http.StatusUnauthorized {
				t.Errorf("%s: no challenge for allowed_client_headers to pass on", c.name)
			}
			continue
		}
		for _, name := range server.ClaimHeaders(gw) {
			if !upstream[strings.ToLower(name)] {
				t.Errorf("claim header %s is not in allowed_upstream_headers", name)
			}
			if _, ok := resp.Header[name]; !ok {
				t.Errorf("%s: keygate's answer lacks %s, so Envoy would leave the client's copy", c.name, name)
			}
		}
		if got := resp.Header.Get("X-Auth-Subject"); got == "forged" || (c.token != "" && got != b.DemoClientID) {
			t.Errorf("%s: X-Auth-Subject %q", c.name, got)
		}
	}
}

// readmeEnvoyHTTPFilter is the README's ext_authz http_service filter, as
// Envoy's v3 ExtAuthz, validated by Envoy's rules.
func readmeEnvoyHTTPFilter(t *testing.T) *extauthzv3.ExtAuthz {
	t.Helper()
	readme, err := os.ReadFile("../../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n### Behind Envoy (ext_authz over HTTP)\n")
	if !ok {
		t.Fatal(`docs/gateway.md has no section "Behind Envoy (ext_authz over HTTP)"`)
	}
	_, block, _ := strings.Cut(section, "\n```yaml\n")
	block, _, _ = strings.Cut(block, "\n```\n")
	var filters []struct {
		Name        string         `yaml:"name"`
		TypedConfig map[string]any `yaml:"typed_config"`
	}
	if err := yaml.Unmarshal([]byte(block), &struct {
		F *[]struct {
			Name        string         `yaml:"name"`
			TypedConfig map[string]any `yaml:"typed_config"`
		} `yaml:"http_filters"`
	}{&filters}); err != nil || len(filters) == 0 {
		t.Fatalf("the block's http_filters: %v", err)
	}
	if filters[0].TypedConfig["@type"] != "type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz" {
		t.Fatalf("the first filter is %v", filters[0].TypedConfig["@type"])
	}
	delete(filters[0].TypedConfig, "@type")
	js, _ := json.Marshal(filters[0].TypedConfig)
	var ea extauthzv3.ExtAuthz
	if err := (protojson.UnmarshalOptions{}).Unmarshal(js, &ea); err != nil {
		t.Fatalf("the ext_authz filter is not Envoy's v3 ExtAuthz: %v", err)
	}
	if err := ea.ValidateAll(); err != nil {
		t.Fatalf("Envoy's validation: %v", err)
	}
	return &ea
}

// envoyAllowedHeaders reports whether the filter's allowed_headers let a
// header through, matched as Envoy matches them: against the name in
// lower case, an exact, prefix or suffix pattern (ignore_case honoured) or
// a safe_regex matching the whole name.
func envoyAllowedHeaders(t *testing.T, ea *extauthzv3.ExtAuthz) func(name string) bool {
	t.Helper()
	type matcher func(string) bool
	var ms []matcher
	for _, p := range ea.GetHttpService().GetAuthorizationRequest().GetAllowedHeaders().GetPatterns() {
		fold := func(s string) string {
			if p.GetIgnoreCase() {
				return strings.ToLower(s)
			}
			return s
		}
		switch {
		case p.GetExact() != "":
			v := fold(p.GetExact())
			ms = append(ms, func(n string) bool { return fold(n) == v })
		case p.GetPrefix() != "":
			v := fold(p.GetPrefix())
			ms = append(ms, func(n string) bool { return strings.HasPrefix(fold(n), v) })
		case p.GetSuffix() != "":
			v := fold(p.GetSuffix())
			ms = append(ms, func(n string) bool { return strings.HasSuffix(fold(n), v) })
		case p.GetSafeRegex() != nil:
			re, err := regexp.Compile("^(?:" + p.GetSafeRegex().GetRegex() + ")$")
			if err != nil {
				t.Fatalf("allowed_headers: %v", err)
			}
			ms = append(ms, re.MatchString)
		default:
			t.Fatalf("allowed_headers: a pattern this test does not read: %v", p)
		}
	}
	return func(name string) bool {
		name = strings.ToLower(name) // Envoy's header map keeps names in lower case
		return slices.ContainsFunc(ms, func(m matcher) bool { return m(name) })
	}
}

// underscoreSpellings is name with every choice of '_' or '-' for each
// of its dashes.
func underscoreSpellings(name string) []string {
	out := []string{name}
	for i := 0; i < len(name); i++ {
		if name[i] != '-' {
			continue
		}
		for _, s := range out {
			out = append(out, s[:i]+"_"+s[i+1:])
		}
	}
	return out
}
