package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const goodYAML = `
listen: 127.0.0.1:8081
admin_listen: 127.0.0.1:0
issuers:
  - issuer: https://idp.example.com/
    jwks_url: https://idp.example.com/jwks.json
    algorithms: [RS256, ES256]
    audiences: [api]
    scopes: [read]
    headers:
      X-Auth-Subject: sub
      X-Auth-Roles: realm_access.roles
  - issuer: tenant-b
    key_files: [b.pem]
    algorithms: [EdDSA]
    leeway: 5s
    require: []
  - issuer: local
    jwks_url: http://127.0.0.1:9999/jwks
    algorithms: [ES256]
routes:
  - path_prefix: /public/
    upstream: http://127.0.0.1:9000
    anonymous: true
  - host: api.example.com
    path_prefix: /v1/
    methods: [GET, POST]
    upstream: http://127.0.0.1:9001
    issuers: [tenant-b]
    scopes: [write]
  - path_prefix: /Files
    upstream: http://127.0.0.1:9002
    case_insensitive: true
    allow_path_params: true
    allow_encoded_slashes: true
    allow_dots_after_empty: true
`

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keygate.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadGood(t *testing.T) {
	c, err := Load(writeConfig(t, goodYAML), []string{"KEYGATE_LOG_LEVEL=debug", "PATH=/bin"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8081" || c.LogLevel != "debug" || c.MaxTokenSize != 8192 {
		t.Errorf("top level: %+v", c)
	}
	a, b := c.Issuers[0], c.Issuers[1]
	if *a.Leeway != DefaultLeeway || len(a.Require) != 1 || a.Require[0] != "exp" {
		t.Errorf("issuer defaults not applied: leeway %v require %v", *a.Leeway, a.Require)
	}
	if *b.Leeway != 5*time.Second || b.Require == nil || len(b.Require) != 0 {
		t.Errorf("explicit values overridden: leeway %v require %#v", *b.Leeway, b.Require)
	}
	if a.Headers["X-Auth-Roles"] != "realm_access.roles" || len(a.Algs()) != 2 {
		t.Errorf("issuer a: %+v", a)
	}
	if r := c.Routes[2]; !r.CaseInsensitive || !r.AllowPathParams || !r.AllowEncodedSlashes || c.Routes[0].CaseInsensitive ||
		c.Routes[0].AllowPathParams || c.Routes[0].AllowEncodedSlashes {
		t.Errorf("path options: %+v, %+v", c.Routes[0], r)
	}
	if !c.Routes[2].AllowDotsAfterEmpty || c.Routes[0].AllowDotsAfterEmpty {
		t.Errorf("allow_dots_after_empty: %+v, %+v", c.Routes[0], c.Routes[2])
	}
}

// TestLoadErrors checks that each mistake is reported with the field it is in.
func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown field", "listen: 127.0.0.1:1\nlisten_addr: x\n", "listen_addr"},
		{"bad listen", "listen: nowhere\n", "listen: not a host:port"},
		{"bad envoy grpc listen", "envoy_grpc_listen: 9001\n", "envoy_grpc_listen: not a host:port"},
		{"reflection without the envoy listener", "envoy_grpc_reflection: true\n", "envoy_grpc_reflection: is set but envoy_grpc_listen is not"},
		{"bad log level", "log_level: loud\n", "log_level"},
		{"token size", "max_token_size: 10\n", "max_token_size"},
		{"no key source", "issuers:\n  - issuer: a\n    algorithms: [ES256]\n", "issuers[0]: needs exactly one key source"},
		{"two key sources", "issuers:\n  - issuer: https://a\n    discovery: true\n    key_files: [x]\n    algorithms: [ES256]\n", "issuers[0]: needs exactly one key source"},
		{"no algorithms", "issuers:\n  - issuer: a\n    key_files: [x]\n", "issuers[0].algorithms: list at least one"},
		{"bad algorithm", "issuers:\n  - issuer: a\n    key_files: [x]\n    algorithms: [none]\n", `issuers[0].algorithms[0]: unsupported algorithm "none"`},
		{"bad jwks url", "issuers:\n  - issuer: a\n    jwks_url: ftp://x/\n    algorithms: [ES256]\n", "issuers[0].jwks_url"},
		{"plain http jwks url", "issuers:\n  - issuer: a\n    jwks_url: http://idp.example.com/jwks\n    algorithms: [ES256]\n", "issuers[0].jwks_url: must be an https URL"},
		{"duplicate issuer", "issuers:\n  - {issuer: a, key_files: [x], algorithms: [ES256]}\n  - {issuer: a, key_files: [y], algorithms: [ES256]}\n", `issuers[1].issuer: "a" is configured twice`},
		{"bad header", "issuers:\n  - {issuer: a, key_files: [x], algorithms: [ES256], headers: {\"X Bad\": sub}}\n", "issuers[0].headers"},
		{"leeway", "issuers:\n  - {issuer: a, key_files: [x], algorithms: [ES256], leeway: 2h}\n", "issuers[0].leeway"},
		{"route upstream", "routes:\n  - path_prefix: /x\n    upstream: nope\n", "routes[0].upstream"},
		{"route prefix", "routes:\n  - path_prefix: x\n    upstream: http://u\n", "routes[0].path_prefix"},
		{"route prefix dot segment", "routes:\n  - path_prefix: /a/../b\n    upstream: http://u\n", "routes[0].path_prefix"},
		{"rule prefix with params", "forward_auth:\n  rules:\n    - path_prefix: /a;b\n", "forward_auth.rules[0].path_prefix"},
		{"rule prefix encoded", "forward_auth:\n  rules:\n    - path_prefix: /a%2Fb\n", "forward_auth.rules[0].path_prefix"},
		{"route issuer", "routes:\n  - upstream: http://u\n    issuers: [ghost]\n", `routes[0].issuers: "ghost" is not a configured issuer`},
		{"anonymous with scopes", "routes:\n  - upstream: http://u\n    anonymous: true\n    scopes: [x]\n", "routes[0]: an anonymous route"},
		{"unknown proxy", "forward_auth:\n  proxy: haproxy\n", `forward_auth.proxy: must be one of auto, nginx, traefik, caddy, envoy, not "haproxy"`},
		{"proxy and trusted headers", "forward_auth:\n  proxy: nginx\n  trusted_headers: {uri: X-Original-URI}\n", "forward_auth.trusted_headers: cannot be combined"},
		{"bad trusted header", "forward_auth:\n  trusted_headers: {uri: \"X Uri\"}\n", "forward_auth.trusted_headers.uri"},
		{"rule upstream", "forward_auth:\n  rules:\n    - upstream: http://u\n", "forward_auth.rules[0].upstream"},
		{"lowercase method", "routes:\n  - upstream: http://u\n    methods: [get]\n", "routes[0].methods"},
		{"token issuer", "token_service:\n  issuer: auth.example.com\n", "token_service.issuer"},
		{"token database", "token_service:\n  database_url: mysql://x\n", "token_service.database_url"},
		{"token redis", "token_service:\n  redis_url: http://x\n", "token_service.redis_url"},
		{"token alg", "token_service:\n  signing_alg: HS256\n", "token_service.signing_alg"},
		{"token rotation", "token_service:\n  key_rotation: -1h\n", "token_service.key_rotation: must not be negative"},
		{"token prepublish", "token_service:\n  key_rotation: 1h\n  key_prepublish: 2h\n", "token_service.key_rotation: must be longer"},
		{"token ttl", "token_service:\n  access_token_ttl: -5m\n", "token_service.access_token_ttl"},
		{"token staleness", "token_service:\n  revocation_max_staleness: 500ms\n", "token_service.revocation_max_staleness"},
		{"store timeout", "token_service:\n  store_timeout: -1s\n", "token_service.store_timeout"},
		{"token rate", "token_service:\n  token_rate_limit: -5\n", "token_service.token_rate_limit"},
		{"trusted proxy", "token_service:\n  trusted_proxies: [10.0.0.0/8, proxy.internal]\n", `token_service.trusted_proxies: "proxy.internal" is not`},
		{"ipv6 prefix short", "token_service:\n  ipv6_prefix: 31\n", "token_service.ipv6_prefix: must be between 32 and 128"},
		{"ipv6 prefix long", "token_service:\n  ipv6_prefix: 129\n", "token_service.ipv6_prefix"},
		{"password hashes", "token_service:\n  password_hashes: -1\n", "token_service.password_hashes"},
		{"token unknown", "token_service:\n  root_key: x\n", "root_key"},
		{"transit budget", "transit:\n  max_batch_cost: -1\n", "transit.max_batch_cost: must not be negative"},
		{"transit workers", "transit:\n  private_key_workers: -2\n", "transit.private_key_workers: must not be negative"},
		{"transit tenant queue", "transit:\n  tenant_queue: -1\n", "transit.tenant_queue: must not be negative"},
		{"transit caller queue", "transit:\n  caller_queue: -1\n", "transit.caller_queue: must not be negative"},
		{"two documents", "listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n", "more than one YAML document"},
		{"not yaml", "listen: [unclosed\n", "yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, tc.yaml), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestForwarding(t *testing.T) {
	cases := []struct {
		yaml, proxy string
		trusted     []string
	}{
		{"", "auto", []string{"X-Forwarded-Method", "X-Original-Method", "X-Forwarded-Uri", "X-Original-Uri", "X-Forwarded-Host"}},
		{"forward_auth: {proxy: nginx}\n", "nginx", []string{"X-Original-Method", "X-Original-Uri", "X-Forwarded-Host"}},
		{"forward_auth: {proxy: envoy}\n", "envoy", nil},
		{"forward_auth: {trusted_headers: {method: x-real-method, uri: X-Real-Uri}}\n", "custom", []string{"X-Real-Method", "X-Real-Uri"}},
	}
	for _, tc := range cases {
		c, err := Load(writeConfig(t, "listen: 127.0.0.1:1\n"+tc.yaml), nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		fw := c.ForwardAuth.Forwarding()
		if fw.Proxy != tc.proxy || strings.Join(fw.Headers(), ",") != strings.Join(tc.trusted, ",") {
			t.Errorf("%q: proxy %q trusting %v, want %q trusting %v", tc.yaml, fw.Proxy, fw.Headers(), tc.proxy, tc.trusted)
		}
	}
}

func TestEnvOverrides(t *testing.T) {
	c, err := Load(writeConfig(t, "listen: 127.0.0.1:1\n"), []string{"KEYGATE_LISTEN=127.0.0.1:2", "KEYGATE_MAX_TOKEN_SIZE=4096", "KEYGATE_ADMIN_LISTEN=off",
		"KEYGATE_ENVOY_GRPC_LISTEN=127.0.0.1:3"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:2" || c.MaxTokenSize != 4096 || c.AdminListen != "off" || c.EnvoyGRPCListen != "127.0.0.1:3" {
		t.Errorf("env not applied: %+v", c)
	}
	if _, err := Load(writeConfig(t, ""), []string{"KEYGATE_MAX_TOKEN_SIZE=big"}); err == nil || !strings.Contains(err.Error(), "KEYGATE_MAX_TOKEN_SIZE") {
		t.Errorf("bad env value: %v", err)
	}
}

func TestTokenService(t *testing.T) {
	body := `
token_service:
  issuer: https://auth.example.com
  audience: api
  database_url: postgres://db.example.com/keygate
  redis_url: redis://cache.example.com:6379
  redis_prefix: kg
  root_key_file: /etc/keygate/root.key
  admin_token_file: /etc/keygate/admin.token
  signing_alg: EdDSA
  key_rotation: 0s
  key_prepublish: 30m
  access_token_ttl: 5m
  revocation_max_staleness: 30s
  store_timeout: 2s
  token_rate_limit: 0
  ipv6_prefix: 56
  password_hashes: 3
`
	c, err := Load(writeConfig(t, body), []string{"KEYGATE_DATABASE_URL=postgres://other/kg"})
	if err != nil {
		t.Fatal(err)
	}
	ts := c.TokenService
	if ts.Issuer != "https://auth.example.com" || ts.Audience != "api" || ts.SigningAlg != "EdDSA" || ts.RedisPrefix != "kg" ||
		ts.KeyRotation == nil || *ts.KeyRotation != 0 || ts.KeyPrePublish != 30*time.Minute || ts.AccessTokenTTL != 5*time.Minute ||
		ts.RevocationMaxStaleness != 30*time.Second || ts.RootKeyFile != "/etc/keygate/root.key" || ts.StoreTimeout != 2*time.Second ||
		ts.TokenRateLimit == nil || *ts.TokenRateLimit != 0 || ts.IPv6Prefix != 56 || ts.PasswordHashes != 3 {
		t.Errorf("token_service: %+v", ts)
	}
	if ts.DatabaseURL != "postgres://other/kg" {
		t.Errorf("KEYGATE_DATABASE_URL did not win over the file: %q", ts.DatabaseURL)
	}
	if c, err := Load(writeConfig(t, "listen: 127.0.0.1:1\n"), nil); err != nil || c.TokenService.KeyRotation != nil {
		t.Errorf("absent key_rotation: %v %v", err, c.TokenService.KeyRotation)
	}
}

func TestMissingFile(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "absent.yaml"), nil); err == nil {
		t.Fatal("missing file accepted")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(goodYAML))
	f.Add([]byte("issuers: [{issuer: a}]"))
	f.Add([]byte("issuers:\n  - issuer: https://x/\n    leeway: 60\n    leway: 1\n")) // the path-naming type check
	f.Add([]byte("a: &x [*x]\nadmin_tls: {cert_fil: a}\ntoken_service: {key_rotation: 30d}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		c.SetDefaults()
		_ = c.Validate() // must not panic on anything Parse accepts
	})
}

func TestParsePrefixes(t *testing.T) {
	tests := []struct {
		in   []string
		want string // the prefixes joined by spaces, or "error"
	}{
		{nil, ""},
		{[]string{"10.0.0.0/8", "192.168.1.7", "::1", "2001:db8::/32"}, "10.0.0.0/8 192.168.1.7/32 ::1/128 2001:db8::/32"},
		{[]string{"10.1.2.3/8"}, "10.0.0.0/8"},       // masked
		{[]string{"::ffff:10.0.0.1"}, "10.0.0.1/32"}, // an IPv4-mapped address is the IPv4 one
		{[]string{"10.0.0.0/33"}, "error"},
		{[]string{"fe80::1%eth0"}, "error"},
		{[]string{"localhost"}, "error"},
		{[]string{""}, "error"},
	}
	for _, tt := range tests {
		got, err := ParsePrefixes(tt.in)
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		res := strings.Join(s, " ")
		if err != nil {
			res = "error"
		}
		if res != tt.want {
			t.Errorf("ParsePrefixes(%q) = %q (%v), want %q", tt.in, res, err, tt.want)
		}
	}
}

// TestValidateFieldErrors: every problem Validate finds is a *FieldError
// naming its field, so that a caller can say which flag or variable set it.
func TestValidateFieldErrors(t *testing.T) {
	c := &Config{Listen: "nowhere", LogLevel: "loud", MaxTokenSize: 8192, AdminListen: "off"}
	err := c.Validate()
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("Validate: %v, want the problems joined", err)
	}
	var fields []string
	for _, e := range joined.Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a *FieldError", e)
		}
		fields = append(fields, fe.Field)
	}
	if strings.Join(fields, " ") != "listen log_level" {
		t.Errorf("fields %v, want listen and log_level", fields)
	}
}
