package config

import (
	"errors"
	"strings"
	"testing"
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
