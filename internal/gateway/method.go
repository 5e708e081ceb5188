package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Request methods
//
// A rule's methods are only as good as the agreement between keygate and
// the upstream on which method a request names. Upstreams disagree with a
// byte-wise comparison in three ways, and keygate reads a method the way
// the most lenient of them does:
//
//   - case: Werkzeug (Flask), Django, Rails and ASP.NET Core run "delete" as
//     DELETE, so a method is matched upper-cased. Go's ServeMux and nginx do
//     not, so the method as sent must reach the same rule, or an anonymous
//     one, as the upper-cased method does;
//   - HEAD: most servers route HEAD to the GET handler (Go's ServeMux, Rails,
//     Flask, Express), so a rule naming GET covers HEAD too;
//   - method override: on a POST, Rails (Rack::MethodOverride), Laravel and
//     Symfony, ASP.NET Core's HttpMethodOverride, Express's method-override
//     and gorilla/handlers run the method named by X-HTTP-Method-Override,
//     X-HTTP-Method or X-Method-Override, or (Laravel, Symfony) by a
//     "_method" query parameter. Each method so named must reach the same
//     rule, or an anonymous one, as the POST does.
//
// A method that is not an RFC 9110 token is refused (ErrInvalidMethod), and
// one whose readings reach different rules is refused (ErrAmbiguousMethod).
// A "_method" in a form body is out of forward-auth's sight: where POST and
// another method of the same path are ruled differently, switch method
// override off in the upstream or rule POST at least as strictly.

// ErrInvalidMethod is the error for a request method, or a method an
// override names, that is not an RFC 9110 token.
var ErrInvalidMethod = errors.New("gateway: invalid request method")

// ErrAmbiguousMethod is the error for a request whose method upstreams read
// in ways that reach different rules (see "Request methods" above).
var ErrAmbiguousMethod = errors.New("gateway: ambiguous request method")

// MethodOverrideHeaders are the headers upstream frameworks take a POST's
// real method from, canonical.
var MethodOverrideHeaders = [...]string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// maxMethodReadings bounds the other readings of one request's method; a
// request naming more is refused as ambiguous.
const maxMethodReadings = 4

// methods is how upstreams may read a request's method: Canonical (upper
// case), decides; every other reading must reach the same rule or an
// anonymous one.
type methods struct {
	canonical string
	other     [maxMethodReadings]string
	n         int
}

// readMethod reads the method of a request with headers h and raw query
// (without '?'): upper-cased, as sent when the upstream gets it as sent
// (the proxy forwards it upper-cased), and on a POST every override it
// carries. h and query may be empty.
func readMethod(method string, h http.Header, query string, asSent bool) (methods, error) {
	var m methods
	up, ok := upperToken(method)
	if !ok {
		return m, ErrInvalidMethod
	}
	m.canonical = up
	if asSent && up != method {
		m.add(method)
	}
	if up != http.MethodPost {
		return m, nil
	}
	for _, name := range MethodOverrideHeaders {
		for _, v := range h[name] {
			// Express takes the first of a list, the others the whole
			// value (which, a list, is no method they run); an empty one
			// overrides nothing.
			for part := range strings.SplitSeq(v, ",") {
				if part = strings.Trim(part, " \t"); part == "" {
					continue
				}
				if err := m.addOverride(part); err != nil {
					return m, err
				}
			}
		}
	}
	return m, m.queryOverrides(query)
}

// queryOverrides adds the methods a "_method" query parameter names, read
// as PHP reads a query (Laravel and Symfony take it from PHP's $_GET):
// "&" and ";" separate, names are percent-decoded, and ".", " " and "["
// in a name become "_", so ".method" names it too.
func (m *methods) queryOverrides(query string) error {
	if !strings.Contains(query, "%") && !containsFold(query, "method") {
		return nil
	}
	for query != "" {
		var part string
		if i := strings.IndexAny(query, "&;"); i >= 0 {
			part, query = query[:i], query[i+1:]
		} else {
			part, query = query, ""
		}
		key, value, _ := strings.Cut(part, "=")
		if k, err := url.QueryUnescape(key); err == nil {
			key = k
		}
		if strings.Map(phpName, key) != "_method" {
			continue
		}
		v, err := url.QueryUnescape(value)
		if err != nil {
			return ErrAmbiguousMethod
		}
		if err := m.addOverride(v); err != nil {
			return err
		}
	}
	return nil
}

// phpName maps the characters PHP turns into "_" in a variable's name.
func phpName(r rune) rune {
	if r == '.' || r == ' ' || r == '[' {
		return '_'
	}
	return r
}

// containsFold reports whether s contains the lower-case ASCII word sub in
// any case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// addOverride adds the method an override names, upper-cased.
func (m *methods) addOverride(v string) error {
	up, ok := upperToken(v)
	if !ok {
		return ErrInvalidMethod
	}
	if !m.add(up) {
		return ErrAmbiguousMethod
	}
	return nil
}

// add adds a reading other than the canonical one; false when there are
// too many.
func (m *methods) add(v string) bool {
	if v == m.canonical {
		return true
	}
	for _, o := range m.other[:m.n] {
		if o == v {
			return true
		}
	}
	if m.n == len(m.other) {
		return false
	}
	m.other[m.n] = v
	m.n++
	return true
}

// upperToken returns s upper-cased if it is an RFC 9110 token (a method's
// syntax), and whether it is. It allocates only for a token with a lower
// case letter.
func upperToken(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	lower := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isTokenByte(c) {
			return "", false
		}
		lower = lower || 'a' <= c && c <= 'z'
	}
	if !lower {
		return s, true
	}
	return strings.ToUpper(s), true
}

// isTokenByte reports whether c is an RFC 9110 tchar.
func isTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// CheckMethod checks that a rule's method is an RFC 9110 token.
func CheckMethod(m string) error {
	if _, ok := upperToken(m); !ok {
		return fmt.Errorf("%q is not an HTTP method", m)
	}
	return nil
}

// allows reports whether the route covers a request with the upper-cased
// method m: any method when it names none, HEAD where it names GET.
func (r *Route) allows(m string) bool {
	if len(r.Methods) == 0 {
		return true
	}
	for _, x := range r.Methods {
		if x == m || m == http.MethodHead && x == http.MethodGet {
			return true
		}
	}
	return false
}
