package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A value that does not fit its field is named by its YAML path and line,
// with what was wanted; the decoder's Go type names never reach the user.
func TestTypeErrorsNameTheYAMLPath(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"duration without a unit", "issuers:\n  - issuer: https://x/\n    leeway: 60\n",
			"issuers[0].leeway (line 3): want a duration such as 60s (a number needs a unit: ns, us, ms, s, m, h), got 60"},
		{"days", "token_service:\n  key_rotation: 30d\n", `token_service.key_rotation (line 2): want a duration such as 60s, 15m or 720h, got "30d" (there is no day unit: 720h)`},
		{"not a duration", "cache: {max_ttl: soon}\n", `cache.max_ttl (line 1): want a duration such as 60s, 15m or 720h, got "soon"`},
		{"misspelt field", "issuers:\n  - issuer: https://x/\n    leway: 60s\n", `issuers[0] (line 3): unknown field "leway" (did you mean "leeway"?)`},
		{"unknown top-level field", "listen_addr: :8080\n", `the file (line 1): unknown field "listen_addr"`},
		{"unknown field in an inline struct", "admin_tls: {cert_fil: a}\n", `admin_tls (line 1): unknown field "cert_fil" (did you mean "cert_file"?)`},
		{"number wanted", "cache:\n  max_entries: lots\n", `cache.max_entries (line 2): want a whole number, got "lots"`},
		{"boolean wanted", "pprof: yes please\n", `pprof (line 1): want true or false, got "yes please"`},
		{"list wanted", "issuers:\n  - issuer: https://x/\n    algorithms: RS256\n", `issuers[0].algorithms (line 3): want a list (- item, or [a, b]), got "RS256"`},
		{"mapping wanted", "issuers: https://x/\n", `issuers (line 1): want a list (- item, or [a, b]), got "https://x/"`},
		{"section wanted", "cache: 5\n", `cache (line 1): want a mapping of max_entries, max_bytes, max_ttl, disabled, got 5`},
		{"nested in a list of rules", "forward_auth:\n  rules:\n    - {path_prefix: /, anonymous: maybe}\n",
			`forward_auth.rules[0].anonymous (line 3): want true or false, got "maybe"`},
		{"map value", "issuers:\n  - issuer: https://x/\n    headers: {X-A: [a, b]}\n", `issuers[0].headers.X-A (line 3): want a single value, got a list`},
		{"float where a number fits", "token_service: {token_rate_limit: fast}\n", `token_service.token_rate_limit (line 1): want a number, got "fast"`},
	} {
		_, err := Parse([]byte(c.yaml))
		var te *TypeError
		if !errors.As(err, &te) || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "config.") || strings.Contains(err.Error(), "time.Duration")) {
			t.Errorf("%s: a Go type name reached the message: %v", c.name, err)
		}
	}
	// What fits still parses.
	if _, err := Parse([]byte("issuers:\n  - issuer: https://x/\n    leeway: 1m30s\n    jwks_url: https://x/j\ncache: {max_ttl: 5m}\ntoken_service: {token_rate_limit: 2.5, key_rotation: 0s}\n")); err != nil {
		t.Errorf("a valid file: %v", err)
	}
}

// Every field outside a list can be set from the environment by one rule,
// and no two fields share a variable.
func TestEnvRule(t *testing.T) {
	seen := map[string]string{}
	for _, v := range EnvVars() {
		if prev, ok := seen[v.Name]; ok {
			t.Errorf("%s names both %s and %s", v.Name, prev, v.Path)
		}
		seen[v.Name] = v.Path
	}
	env := []string{
		"KEYGATE_TOKEN_SERVICE_REDIS_PREFIX=kg2", "KEYGATE_TOKEN_SERVICE_KEY_ROTATION=48h", "KEYGATE_TOKEN_SERVICE_TOKEN_RATE_LIMIT=2.5",
		"KEYGATE_AUDIT_FILE_SYNC=batch", "KEYGATE_CACHE_DISABLED=true", "KEYGATE_ADMIN_HOSTS=a.example, b.example",
		"KEYGATE_ADMIN_TLS_CLIENT_CA_FILE=/ca.pem", "KEYGATE_ADMIN_TLS_CERT_FILE=/c.pem", "KEYGATE_ADMIN_TLS_KEY_FILE=/k.pem",
		"KEYGATE_DATABASE_URL=postgres://alias/x", "KEYGATE_FORWARD_AUTH_PROXY=nginx", "KEYGATE_UNRELATED=1",
	}
	c := new(Config)
	if err := c.ApplyEnv(env); err != nil {
		t.Fatal(err)
	}
	ts := c.TokenService
	if ts.RedisPrefix != "kg2" || ts.KeyRotation == nil || *ts.KeyRotation != 48*time.Hour || ts.TokenRateLimit == nil || *ts.TokenRateLimit != 2.5 ||
		c.Audit.File.Sync != "batch" || !c.Cache.Disabled || strings.Join(c.AdminHosts, "|") != "a.example|b.example" ||
		c.AdminTLS.ClientCAFile != "/ca.pem" || c.AdminTLS.CertFile != "/c.pem" || ts.DatabaseURL != "postgres://alias/x" || c.ForwardAuth.Proxy != "nginx" {
		t.Errorf("not applied: %+v", c)
	}
	// The rule's name wins over an alias, whatever the order.
	c = new(Config)
	if err := c.ApplyEnv([]string{"KEYGATE_TOKEN_SERVICE_DATABASE_URL=postgres://rule/x", "KEYGATE_DATABASE_URL=postgres://alias/x"}); err != nil ||
		c.TokenService.DatabaseURL != "postgres://rule/x" {
		t.Errorf("alias over the rule's name: %q %v", c.TokenService.DatabaseURL, err)
	}
	for k, want := range map[string]string{
		"KEYGATE_CACHE_MAX_TTL=5":             "KEYGATE_CACHE_MAX_TTL=\"5\": want a duration",
		"KEYGATE_PPROF=yes please":            "want true or false",
		"KEYGATE_CACHE_MAX_ENTRIES=many":      "want a whole number",
		"KEYGATE_TOKEN_SERVICE_IPV6_PREFIX=x": "KEYGATE_TOKEN_SERVICE_IPV6_PREFIX",
	} {
		if err := new(Config).ApplyEnv([]string{k}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", k, err, want)
		}
	}
	for _, v := range EnvVars() {
		if strings.HasPrefix(v.Path, "issuers") || strings.HasPrefix(v.Path, "routes") || strings.HasPrefix(v.Path, "forward_auth.rules") {
			t.Errorf("%s (%s) reaches into a list of sections", v.Name, v.Path)
		}
	}
}
