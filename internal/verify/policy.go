package verify

import (
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/verify/verifykeys"
	"github.com/keygate/keygate/jose"
)

// DefaultLeeway is the clock-skew tolerance on exp, nbf and iat when a
// Policy leaves Leeway zero.
const DefaultLeeway = 60 * time.Second

// Policy is what the pipeline demands of the tokens of one issuer.
type Policy struct {
	// Issuer is the exact "iss" value this policy applies to.
	Issuer string
	// Keys supplies the issuer's verification keys.
	Keys verifykeys.Source
	// Algorithms is the allow-list of "alg" values; it must not be empty.
	Algorithms []jose.Alg
	// Audiences, if set, must share a value with "aud" (any-of), or all
	// appear in it when AllAudiences is set.
	Audiences    []string
	AllAudiences bool
	// Leeway is the clock-skew tolerance on exp, nbf and iat: zero means
	// DefaultLeeway, a negative value means none.
	Leeway time.Duration
	// Require names claims that must be present. nil means ["exp"]; an
	// empty non-nil slice requires nothing.
	Require []string
	// Scopes must all be present in "scope"/"scp"; a token lacking one is
	// refused with ErrInsufficientScope.
	Scopes []string
	// Type, if set, is the expected "typ" header, such as "at+jwt"
	// (compared ignoring case and an "application/" prefix).
	Type string
	// Headers maps claims to request headers for the upstream service.
	Headers []HeaderMapping
}

// HeaderMapping names a request header and the claim that fills it.
//
// Claim is a claim name or a dotted path into nested objects, such as
// "realm_access.roles"; a name that itself contains dots (as namespaced
// claims like "https://example.com/roles" do) is matched whole first.
// Values render as: strings as they are, arrays comma-separated, numbers
// and booleans as their JSON text, objects as compact JSON, and a missing
// claim or null as "". The header is sent even when empty, so that a proxy
// overwrites any copy the client forged. Control characters (CR, LF and the
// like) are replaced by spaces so that a claim cannot inject headers.
type HeaderMapping struct {
	Header string
	Claim  string
}

// PolicyError is a configuration error, naming the issuer and field.
type PolicyError struct {
	Issuer string // "" when the policy has none
	Field  string // such as "Algorithms" or "Headers[2].Claim"
	Msg    string
}

func (e *PolicyError) Error() string {
	return "policy " + quoteIssuer(e.Issuer) + ": " + e.Field + ": " + e.Msg
}

func quoteIssuer(iss string) string {
	if iss == "" {
		return "(no issuer)"
	}
	return `"` + iss + `"`
}

// Validate reports the first problem with p, naming the field.
func (p *Policy) Validate() error {
	bad := func(field, msg string) error { return &PolicyError{Issuer: p.Issuer, Field: field, Msg: msg} }
	if p.Issuer == "" {
		return bad("Issuer", "must not be empty")
	}
	if p.Keys == nil {
		return bad("Keys", "must be set")
	}
	if len(p.Algorithms) == 0 {
		return bad("Algorithms", "must list at least one algorithm")
	}
	for i, a := range p.Algorithms {
		if b, err := jose.ParseAlg(a.String()); err != nil || b != a {
			return bad("Algorithms["+strconv.Itoa(i)+"]", "is not a supported algorithm")
		}
	}
	for i, a := range p.Audiences {
		if a == "" {
			return bad("Audiences["+strconv.Itoa(i)+"]", "must not be empty")
		}
	}
	if p.AllAudiences && len(p.Audiences) == 0 {
		return bad("AllAudiences", "needs Audiences")
	}
	for i, c := range p.Require {
		if c == "" {
			return bad("Require["+strconv.Itoa(i)+"]", "must not be empty")
		}
	}
	for i, s := range p.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n") {
			return bad("Scopes["+strconv.Itoa(i)+"]", "must be one non-empty scope without spaces")
		}
	}
	seen := make(map[string]bool, len(p.Headers))
	for i, h := range p.Headers {
		f := "Headers[" + strconv.Itoa(i) + "]"
		if !ValidHeaderName(h.Header) {
			return bad(f+".Header", "is not a valid HTTP header name")
		}
		canon := textproto.CanonicalMIMEHeaderKey(h.Header)
		if seen[canon] {
			return bad(f+".Header", "repeats "+canon)
		}
		seen[canon] = true
		if h.Claim == "" || h.Claim[0] == '.' || h.Claim[len(h.Claim)-1] == '.' {
			return bad(f+".Claim", "must be a claim name or dotted path")
		}
	}
	return nil
}

// ValidHeaderName reports whether s is an RFC 9110 token, as a header name
// must be.
func ValidHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// policy is a validated Policy with everything the request path needs
// worked out once.
type policy struct {
	issuer   string
	keys     verifykeys.Source
	algs     uint32 // bit a set when Alg a is allowed
	expected jose.Expected
	typ      string
	scopes   []string
	scopeErr []*Error // scopeErr[i] refuses a token lacking scopes[i]
	headers  []HeaderMapping
	idx      int // in Pipeline.pols
}

func compile(p *Policy) (*policy, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	c := &policy{issuer: p.Issuer, keys: p.Keys, typ: p.Type}
	for _, a := range p.Algorithms {
		c.algs |= 1 << a
	}
	leeway := p.Leeway
	switch {
	case leeway == 0:
		leeway = DefaultLeeway
	case leeway < 0:
		leeway = 0
	}
	require := p.Require
	if require == nil {
		require = []string{"exp"}
	}
	c.expected = jose.Expected{
		Issuer:       p.Issuer,
		Audience:     append([]string(nil), p.Audiences...),
		AllAudiences: p.AllAudiences,
		Type:         p.Type,
		Require:      append([]string(nil), require...),
		Leeway:       leeway,
	}
	c.scopes = append([]string(nil), p.Scopes...)
	for _, s := range c.scopes {
		c.scopeErr = append(c.scopeErr, &Error{reason: ErrInsufficientScope.reason, Detail: "scope " + s + " is missing"})
	}
	for _, h := range p.Headers {
		c.headers = append(c.headers, HeaderMapping{Header: textproto.CanonicalMIMEHeaderKey(h.Header), Claim: h.Claim})
	}
	return c, nil
}
