package verify

import (
	"errors"
	"testing"

	"github.com/keygate/keygate/jose"
)

func TestPolicyValidate(t *testing.T) {
	src := newSource()
	good := func() Policy {
		return Policy{Issuer: issA, Keys: src, Algorithms: []jose.Alg{jose.ES256}}
	}
	tests := []struct {
		name  string
		mod   func(p *Policy)
		field string // "" for valid
	}{
		{"valid", func(*Policy) {}, ""},
		{"valid with everything", func(p *Policy) {
			p.Audiences, p.AllAudiences, p.Scopes, p.Type = []string{"a"}, true, []string{"read"}, "at+jwt"
			p.Headers = []HeaderMapping{{"X-User", "sub"}, {"X-Roles", "realm_access.roles"}}
		}, ""},
		{"no issuer", func(p *Policy) { p.Issuer = "" }, "Issuer"},
		{"no keys", func(p *Policy) { p.Keys = nil }, "Keys"},
		{"no algorithms", func(p *Policy) { p.Algorithms = nil }, "Algorithms"},
		{"invalid algorithm", func(p *Policy) { p.Algorithms = []jose.Alg{jose.ES256, 0} }, "Algorithms[1]"},
		{"out-of-range algorithm", func(p *Policy) { p.Algorithms = []jose.Alg{200} }, "Algorithms[0]"},
		{"empty audience", func(p *Policy) { p.Audiences = []string{""} }, "Audiences[0]"},
		{"all audiences without audiences", func(p *Policy) { p.AllAudiences = true }, "AllAudiences"},
		{"empty required claim", func(p *Policy) { p.Require = []string{"exp", ""} }, "Require[1]"},
		{"scope with space", func(p *Policy) { p.Scopes = []string{"read write"} }, "Scopes[0]"},
		{"empty scope", func(p *Policy) { p.Scopes = []string{""} }, "Scopes[0]"},
		{"bad header name", func(p *Policy) { p.Headers = []HeaderMapping{{"X User", "sub"}} }, "Headers[0].Header"},
		{"header name with newline", func(p *Policy) { p.Headers = []HeaderMapping{{"X-A\n", "sub"}} }, "Headers[0].Header"},
		{"repeated header", func(p *Policy) {
			p.Headers = []HeaderMapping{{"X-User", "sub"}, {"x-user", "email"}}
		}, "Headers[1].Header"},
		{"empty claim", func(p *Policy) { p.Headers = []HeaderMapping{{"X-User", ""}} }, "Headers[0].Claim"},
		{"claim path with trailing dot", func(p *Policy) { p.Headers = []HeaderMapping{{"X-User", "a."}} }, "Headers[0].Claim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := good()
			tt.mod(&p)
			err := p.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var pe *PolicyError
			if !errors.As(err, &pe) || pe.Field != tt.field {
				t.Fatalf("Validate = %v, want an error for field %s", err, tt.field)
			}
			if _, err := New(Config{Policies: []Policy{p}}); err == nil {
				t.Fatal("New accepted an invalid policy")
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	src := newSource()
	pol := Policy{Issuer: issA, Keys: src, Algorithms: []jose.Alg{jose.ES256}}
	tests := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"no policies", Config{}, "Policies"},
		{"duplicate issuer", Config{Policies: []Policy{pol, pol}}, "Issuer"},
		{"negative cache bound", Config{Policies: []Policy{pol}, Cache: CacheConfig{MaxEntries: -1}}, "Cache"},
		{"negative max token size", Config{Policies: []Policy{pol}, MaxTokenSize: -1}, "MaxTokenSize"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			var pe *PolicyError
			if !errors.As(err, &pe) || pe.Field != tt.field {
				t.Fatalf("New = %v, want an error for field %s", err, tt.field)
			}
		})
	}
}

func TestPolicyCopied(t *testing.T) {
	s := ecSigner(t, 0, "k")
	auds := []string{"api"}
	p := mustNew(t, Config{Policies: []Policy{{Issuer: issA, Keys: newSource(s.Key()),
		Algorithms: []jose.Alg{jose.ES256}, Audiences: auds}}, Now: newClock().Now})
	auds[0] = "other" // the caller's slice changes after New
	tok := mint(t, s, claims{"iss": issA, "aud": "api", "exp": t0.Unix() + 60})
	if _, err := p.Verify(t.Context(), tok); err != nil {
		t.Fatalf("New did not copy the policy: %v", err)
	}
}
