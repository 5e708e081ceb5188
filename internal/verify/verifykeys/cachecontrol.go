package verifykeys

import (
	"net/http"
	"strings"
	"time"
)

// maxDeltaSeconds is the largest delta-seconds value honoured; larger ones
// are read as this (RFC 9111 §1.2.2).
const maxDeltaSeconds = 1 << 31

// cacheControl holds the Cache-Control response directives that decide when
// a JWKS is fetched again.
type cacheControl struct {
	maxAge    time.Duration // valid when hasMaxAge
	hasMaxAge bool
	noStore   bool
	noCache   bool
}

// parseCacheControl reads a Cache-Control field value (several field lines
// joined with commas). Directive names are case-insensitive, values may be
// tokens or quoted strings, and quoted strings may hold commas. The first
// max-age wins; an invalid one reads as 0, that is stale (RFC 9111 §4.2.1).
// Unknown directives are ignored. It never panics, whatever the input.
func parseCacheControl(v string) cacheControl {
	var cc cacheControl
	for v != "" {
		var dir string
		dir, v = nextDirective(v)
		name, value, hasValue := strings.Cut(dir, "=")
		name = strings.ToLower(strings.Trim(name, " \t"))
		switch name {
		case "no-store":
			cc.noStore = true
		case "no-cache":
			// With a field list (no-cache="Set-Cookie") only those fields
			// are concerned; the keys themselves may still be reused.
			if !hasValue {
				cc.noCache = true
			}
		case "max-age":
			if !cc.hasMaxAge {
				cc.hasMaxAge = true
				cc.maxAge = deltaSeconds(unquote(strings.Trim(value, " \t")))
			}
		}
	}
	return cc
}

// nextDirective splits off the text before the first comma that is not
// inside a quoted string.
func nextDirective(v string) (dir, rest string) {
	quoted := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case quoted && c == '\\':
			i++ // the escaped byte, whatever it is
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			return v[:i], v[i+1:]
		}
	}
	return v, ""
}

// unquote removes the quotes and backslash escapes of a quoted string; a
// token comes back unchanged.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	s = s[1 : len(s)-1]
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// deltaSeconds parses a non-negative decimal number of seconds, capped at
// maxDeltaSeconds. Anything else reads as 0.
func deltaSeconds(s string) time.Duration {
	if s == "" {
		return 0
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0
		}
		if n < maxDeltaSeconds {
			n = n*10 + int64(c-'0')
		}
	}
	return time.Duration(min(n, maxDeltaSeconds)) * time.Second
}

// freshness tells how long a response stays fresh (RFC 9111 §4.2): the
// first max-age, else Expires minus Date (or now without a valid Date), in
// both cases less the Age the response already had. no-store and no-cache
// make it 0, and so does an invalid Expires. ok is false when the response
// says nothing.
func freshness(h http.Header, now time.Time) (d time.Duration, ok bool) {
	cc := parseCacheControl(strings.Join(h.Values("Cache-Control"), ","))
	switch {
	case cc.noStore || cc.noCache:
		return 0, true
	case cc.hasMaxAge:
		d = cc.maxAge
	case h.Get("Expires") != "":
		exp, err := http.ParseTime(h.Get("Expires"))
		if err != nil {
			return 0, true
		}
		base := now
		if date, err := http.ParseTime(h.Get("Date")); err == nil {
			base = date
		}
		d = exp.Sub(base)
	default:
		return 0, false
	}
	// Subtract without overflow: d may be the most negative Duration.
	if age := deltaSeconds(strings.Trim(h.Get("Age"), " \t")); d > age {
		return d - age, true
	}
	return 0, true
}

// refreshInterval is how long to keep a JWKS before fetching it again: its
// freshness lifetime, or def when the response gives none, clamped to
// [lo, hi].
func refreshInterval(h http.Header, now time.Time, lo, hi, def time.Duration) time.Duration {
	d, ok := freshness(h, now)
	if !ok {
		d = def
	}
	return min(max(d, lo), hi)
}
