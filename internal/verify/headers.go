package verify

import (
	"bytes"
	"encoding/json"
	"strings"
	"unsafe"

	"github.com/keygate/keygate/jose"
)

// HeaderValue is one header the front end sets on the upstream request.
type HeaderValue struct {
	Name  string // canonical form, as textproto.CanonicalMIMEHeaderKey gives
	Value string
	// vals is Value as an http.Header value, made once per verification
	// so that a cached decision sets its headers without allocating.
	vals []string
}

// Values returns the value as an http.Header value: a one-element slice
// shared by every request that presents the same token, to be assigned
// (h[name] = hv.Values()), never modified.
func (hv *HeaderValue) Values() []string {
	if hv.vals == nil {
		return []string{hv.Value}
	}
	return hv.vals
}

// headerValues renders the policy's header mappings from verified claims
// into buf (and their http.Header forms into vals), or new slices if they
// are too small. It runs once per verification; cache hits reuse the
// result.
func headerValues(c *jose.Claims, maps []HeaderMapping, buf []HeaderValue, vals []string) []HeaderValue {
	if len(maps) == 0 {
		return nil
	}
	var out []HeaderValue
	if len(maps) <= len(buf) && len(maps) <= len(vals) {
		out = buf[:len(maps):len(maps)]
	} else {
		out, vals = make([]HeaderValue, len(maps)), make([]string, len(maps))
	}
	for i, m := range maps {
		out[i].Name = m.Header
		if raw, ok := claimPath(c, m.Claim); ok {
			out[i].Value = sanitize(render(raw))
		}
		vals[i] = out[i].Value
		out[i].vals = vals[i : i+1 : i+1]
	}
	return out
}

// claimPath finds the raw JSON of a claim name or dotted path. The whole
// name is tried first, then each split at a dot whose prefix names an
// object, so that claim names containing dots are reachable.
func claimPath(c *jose.Claims, path string) ([]byte, bool) {
	if raw, ok := c.Raw(path); ok {
		return raw, true
	}
	for i := 0; i < len(path); i++ {
		if path[i] != '.' {
			continue
		}
		if obj, ok := c.Raw(path[:i]); ok && firstByte(obj) == '{' {
			if raw, ok := memberPath(obj, path[i+1:]); ok {
				return raw, true
			}
		}
	}
	return nil, false
}

// memberPath is claimPath inside a JSON object.
func memberPath(obj []byte, path string) ([]byte, bool) {
	if raw, ok := member(obj, path); ok {
		return raw, true
	}
	for i := 0; i < len(path); i++ {
		if path[i] != '.' {
			continue
		}
		if inner, ok := member(obj, path[:i]); ok && firstByte(inner) == '{' {
			if raw, ok := memberPath(inner, path[i+1:]); ok {
				return raw, true
			}
		}
	}
	return nil, false
}

// render turns a raw JSON value into header text: strings as they are,
// arrays comma-separated, null as "", anything else as compact JSON.
//
// Strings without escapes, numbers and booleans are returned as views into
// raw, which is the token's decoded payload: it is never written after
// parsing and lives as long as the Result that holds the Token.
func render(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	switch firstByte(raw) {
	case '"':
		return unquote(raw)
	case '[':
		var b strings.Builder
		b.Grow(len(raw))
		n := 0
		ok := elements(raw, func(elem []byte) {
			if n > 0 {
				b.WriteByte(',')
			}
			n++
			switch firstByte(elem) {
			case '"':
				b.WriteString(unquote(elem))
			case '{', '[':
				b.WriteString(compact(elem))
			default:
				b.Write(elem)
			}
		})
		if !ok {
			return ""
		}
		return b.String()
	case 'n':
		return ""
	case '{':
		return compact(raw)
	}
	return view(raw) // a number or boolean: no white space inside
}

func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func compact(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return ""
	}
	return b.String()
}

func unquote(raw []byte) string {
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 {
		return view(raw[1 : len(raw)-1])
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// sanitize replaces control characters, which a header value must not hold,
// with spaces: a claim holding "\r\n" must not add a header of its own.
func sanitize(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return strings.Map(func(r rune) rune {
				if (r < ' ' && r != '\t') || r == 0x7f {
					return ' '
				}
				return r
			}, s)
		}
	}
	return s
}

func firstByte(b []byte) byte {
	for _, c := range b {
		if !isSpace(c) {
			return c
		}
	}
	return 0
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// The claims were checked as strict JSON when the token was parsed, so the
// readers below only need to find boundaries; on anything unexpected they
// report failure rather than guess.

// member returns the raw value of the named member of a JSON object.
func member(obj []byte, name string) ([]byte, bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, false
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil, false
	}
	for i < len(obj) {
		kEnd := skipString(obj, i)
		if kEnd < 0 {
			return nil, false
		}
		key := obj[i:kEnd]
		i = skipSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return nil, false
		}
		vStart := skipSpace(obj, i+1)
		vEnd := skipValue(obj, vStart)
		if vEnd < 0 {
			return nil, false
		}
		if keyEquals(key, name) {
			return obj[vStart:vEnd], true
		}
		i = skipSpace(obj, vEnd)
		if i >= len(obj) || obj[i] != ',' {
			return nil, false
		}
		i = skipSpace(obj, i+1)
	}
	return nil, false
}

func keyEquals(quoted []byte, name string) bool {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return len(quoted) == len(name)+2 && string(quoted[1:len(quoted)-1]) == name
	}
	return unquote(quoted) == name
}

// elements calls fn with each element of a JSON array.
func elements(arr []byte, fn func([]byte)) bool {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return false
	}
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return true
	}
	for i < len(arr) {
		end := skipValue(arr, i)
		if end < 0 {
			return false
		}
		fn(arr[i:end])
		i = skipSpace(arr, end)
		if i >= len(arr) {
			return false
		}
		if arr[i] == ']' {
			return true
		}
		if arr[i] != ',' {
			return false
		}
		i = skipSpace(arr, i+1)
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i], or -1.
func skipString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index after the value starting at b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end := skipString(b, i)
				if end < 0 {
					return -1
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	start := i
	for i < len(b) && !isSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
		i++
	}
	if i == start {
		return -1
	}
	return i
}
