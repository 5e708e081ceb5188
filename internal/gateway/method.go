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
//     "_method" query parameter; Yii2, Slim 4 and CakePHP take the header on
//     any method, GET included. CGI-style servers (PHP's SAPIs, Rack's)
//     read "_" in a header's name as "-", so X_HTTP_Method_Override names
//     it too. Each method so named must reach the same rule, or an
//     anonymous one, as the request's own method does.
//
// A method that is not an RFC 9110 token is refused (ErrInvalidMethod), and
// one whose readings reach different rules is refused (ErrAmbiguousMethod).
// A "_method" in a form body is out of forward-auth's sight: where POST and
// another method of the same path are ruled differently, switch method
// override off in the upstream or rule POST at least as strictly.

// ErrInvalidMethod is the error for a request method, or a method an
// override names, that is not an RFC 9110 token.
var ErrInvalidMethod = errors.New("invalid request method")

// ErrAmbiguousMethod is the error for a request whose method upstreams read
// in ways that reach different rules (see "Request methods" above).
var ErrAmbiguousMethod = errors.New("ambiguous request method")

// MethodOverrideHeaders are the headers upstream frameworks take a request's
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

// readMethod reads a request's method upper-cased, the reading that
// decides; readOthers adds the rest where rules tell methods apart.
func readMethod(method string) (methods, error) {
	up, ok := upperToken(method)
	if !ok {
		return methods{}, ErrInvalidMethod
	}
	return methods{canonical: up}, nil
}

// readOthers adds the other readings of method (as read by readMethod) of
// a request with headers h and raw query (without '?'): as sent, when the
// upstream gets it as sent (the proxy forwards it upper-cased); every
// override header; and on a POST every "_method" of its query. h and
// query may be empty.
func (m *methods) readOthers(method string, h http.Header, query string, asSent bool) error {
	if asSent && m.canonical != method {
		m.add(method)
	}
	for k, vs := range h {
		if !IsMethodOverrideHeader(k) {
			continue
		}
		for _, v := range vs {
			if err := m.addHeaderOverride(v); err != nil {
				return err
			}
		}
	}
	if m.canonical != http.MethodPost {
		return nil
	}
	return m.queryOverrides(query)
}

// IsMethodOverrideHeader reports whether name is one of
// MethodOverrideHeaders, in any case and with '_' for any '-', as a
// CGI-style server reads it.
func IsMethodOverrideHeader(name string) bool {
	// Every one begins "X-" and is 13 to 22 bytes long.
	if len(name) < len("X-Http-Method") || len(name) > len("X-Http-Method-Override") || name[0]|0x20 != 'x' {
		return false
	}
	for _, o := range MethodOverrideHeaders {
		if sameHeader(name, o) {
			return true
		}
	}
	return false
}

// addHeaderOverride adds the methods an override header's value names.
// Express takes the first of a list, the others the whole value (which,
// a list, is no method they run); an empty one overrides nothing.
func (m *methods) addHeaderOverride(v string) error {
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.Trim(part, " \t"); part == "" {
			continue
		}
		if err := m.addOverride(part); err != nil {
			return err
		}
	}
	return nil
}

// queryOverrides adds the methods a "_method" query parameter names, read
// as PHP reads a query (Laravel and Symfony take it from PHP's $_GET):
// "&" and ";" separate, names are percent-decoded (an invalid escape kept
// as it is), a name ends at a NUL and loses its leading spaces, and ".",
// " " and "[" in it become "_"; so ".method", "+_method" and
// "_method%00x" name it too.
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
		if phpVarName(key) != "_method" {
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

// phpVarName is the name PHP registers a query's raw key under (up to
// its first '['): percent-decoded leniently, cut at a NUL (PHP handles
// the name as a C string), leading spaces dropped, then mapped by phpName.
func phpVarName(key string) string {
	if strings.ContainsAny(key, "%+") {
		key = phpUnescape(key)
	}
	if i := strings.IndexByte(key, 0); i >= 0 {
		key = key[:i]
	}
	return strings.Map(phpName, strings.TrimLeft(key, " "))
}

// phpUnescape decodes s as PHP's urldecode does: "+" is a space, "%XX" its
// byte, and any other "%" kept as it is.
func phpUnescape(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b = append(b, ' ')
		case c == '%' && i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2]):
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return string(b)
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

// coversTarget reports whether the route covers host and the decoded path
// p, whatever the method.
func (r *Route) coversTarget(host, p string) bool {
	return (r.host == "" || strings.EqualFold(r.host, host)) && r.covers(p)
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
