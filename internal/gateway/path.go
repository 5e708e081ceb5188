package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Request paths
//
// A rule is only as good as the agreement between keygate and the upstream
// on which path a request names. keygate reads a path the way Tomcat does
// (";" parameters stripped from each segment, then percent-decoded, then
// empty segments dropped and dot segments resolved) and refuses, with
// ErrAmbiguousPath, every path that common upstreams read in different ways:
//
//   - control characters and NUL, raw or percent-encoded, and raw backslashes;
//   - percent-encoded ".", ";" (any case), and any escape that does not
//     decode, or decodes to invalid UTF-8 (overlong forms of "." among them);
//   - an escape that decodes to the escape of one of these or of "/", "\" or
//     "%" (double encoding such as %252e);
//   - ";" parameters, unless the rule opts in (PathOptions.AllowPathParams);
//   - percent-encoded "/" and "\" (%2F, %5C), unless the rule opts in
//     (PathOptions.AllowEncodedSlashes), and always when one hides a dot
//     segment ("..%2F");
//   - a ".." after an empty segment that RFC 3986 resolves to another path
//     ("/admin//../users": Tomcat, nginx and Go read /users, Node.js's URL,
//     Python's urljoin and Jetty /admin/users), unless the rule opts in
//     (PathOptions.AllowDotsAfterEmpty).
//
// The path must also reach the same rule, or an anonymous one, under every
// other reading an upstream may apply (see Router.Match).
// ErrAmbiguousPath is the error for a request path that common upstream
// servers read in different ways (see "Request paths" above).
var ErrAmbiguousPath = errors.New("ambiguous request path")

// PathOptions are what a rule lets through that a path is otherwise
// refused for.
type PathOptions struct {
	// AllowPathParams accepts ";" parameters in segments, as in
	// "/app/login;jsessionid=1", and keeps them in the forwarded path.
	AllowPathParams bool
	// AllowEncodedSlashes accepts %2F and %5C, and keeps them encoded in
	// the forwarded path.
	AllowEncodedSlashes bool
	// AllowDotsAfterEmpty accepts a ".." that removes another segment
	// when empty segments count (RFC 3986) than when they are dropped
	// (Tomcat), as in "/a//../b"; the path is decided on, and the proxy
	// forwards it, as Tomcat reads it.
	AllowDotsAfterEmpty bool
}

// parsedPath is a checked request path.
type parsedPath struct {
	raw            string // set when the path is plain: already canonical
	segs           []segment
	params         bool // some segment has ";" parameters
	encSlash       bool // some segment has %2F or %5C
	dotsAfterEmpty bool // Tomcat and RFC 3986 resolve the dot segments to different paths
	dotOrEmpty     bool // some segment but the last is empty, or some segment is a dot segment
	netPath        bool // the path starts with "//"
	trailingDots   bool // some segment but a dot segment ends in '.' or ' '
}

// segment is one segment of a path that is not plain.
type segment struct {
	name      string // before the first ';', escapes normalised
	params    string // after it, escapes normalised
	hasParams bool
	decoded   string // name, decoded
}

func (p *parsedPath) allowedBy(o PathOptions) bool {
	return (!p.params || o.AllowPathParams) && (!p.encSlash || o.AllowEncodedSlashes) &&
		(!p.dotsAfterEmpty || o.AllowDotsAfterEmpty)
}

func parsePath(raw string) (parsedPath, error) {
	if raw == "" || raw[0] != '/' {
		raw = "/" + raw
	}
	if plainPath(raw) {
		return parsedPath{raw: raw}, nil
	}
	var p parsedPath
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '%':
			if i+2 >= len(raw) || !ishex(raw[i+1]) || !ishex(raw[i+2]) {
				return p, ErrAmbiguousPath
			}
			switch b := unhex(raw[i+1])<<4 | unhex(raw[i+2]); {
			case b == '/' || b == '\\':
				p.encSlash = true
			case b < 0x20 || b == 0x7f || b == '.' || b == ';':
				return p, ErrAmbiguousPath
			}
			i += 2
		case c == ';':
			p.params = true
		case c < 0x20 || c == 0x7f || c == '\\' || c == '#':
			// '#': a fragment, which no request target has, or a
			// character, as Go's servers read it (see SplitURI).
			return p, ErrAmbiguousPath
		}
	}
	// Every escape is valid now. What each segment's name and parameters
	// decode to must be UTF-8 and hold no escape of a refused character
	// (an escape never spans the '/' and ';' they are split at).
	p.segs = make([]segment, 0, strings.Count(raw, "/"))
	for rest := raw[1:]; ; {
		seg, after, more := strings.Cut(rest, "/")
		if p.encSlash && hidesDotSegment(seg) {
			return p, ErrAmbiguousPath
		}
		name, params, has := strings.Cut(seg, ";")
		s := segment{name: normEscapes(name), hasParams: has}
		s.decoded = unescape(s.name)
		if !decodesCleanly(s.decoded) {
			return p, ErrAmbiguousPath
		}
		if has {
			s.params = normEscapes(params)
			if !decodesCleanly(unescape(s.params)) {
				return p, ErrAmbiguousPath
			}
		}
		switch d := s.decoded; {
		case d == "" && more, d == ".", d == "..":
			p.dotOrEmpty = true
		case strings.HasSuffix(d, ".") || strings.HasSuffix(d, " "):
			p.trailingDots = true
		}
		p.segs = append(p.segs, s)
		if !more {
			break
		}
		rest = after
	}
	if p.encSlash {
		// A decoded slash makes pieces of a segment: assume the worst.
		p.dotOrEmpty, p.trailingDots = true, true
	}
	p.netPath = strings.HasPrefix(raw, "//")
	p.dotsAfterEmpty = p.dotOrEmpty && p.resolvesApart()
	return p, nil
}

// resolvesApart reports whether the segments that remain once dot segments
// are resolved differ between empty segments dropped first (Tomcat) and
// empty segments kept, so that a ".." may remove one (RFC 3986 §5.2.4).
func (p *parsedPath) resolvesApart() bool {
	var tomcat, rfc []int // indexes of the segments kept; -1 for an empty one
	for i, s := range p.segs {
		switch s.decoded {
		case ".":
		case "":
			rfc = append(rfc, -1)
		case "..":
			if len(tomcat) > 0 {
				tomcat = tomcat[:len(tomcat)-1]
			}
			if len(rfc) > 0 {
				rfc = rfc[:len(rfc)-1]
			}
		default:
			tomcat, rfc = append(tomcat, i), append(rfc, i)
		}
	}
	return !slices.Equal(tomcat, slices.DeleteFunc(rfc, func(i int) bool { return i < 0 }))
}

// plainPath reports whether raw (starting with '/') is already canonical
// and means the same to every upstream: only characters that stand for
// themselves, no escapes or parameters, no empty or dot segments but a
// trailing slash, and no segment ending in '.'.
func plainPath(raw string) bool {
	start := 1
	for i := 1; i <= len(raw); i++ {
		if i < len(raw) && raw[i] != '/' {
			if !plainByte(raw[i]) {
				return false
			}
			continue
		}
		switch seg := raw[start:i]; {
		case seg == "":
			if i < len(raw) {
				return false
			}
		case seg[len(seg)-1] == '.':
			return false
		}
		start = i + 1
	}
	return true
}

// A reading is one way of reading a path that some upstream applies; which
// ones keygate checks is said at Router.Match.
type reading struct {
	keepParams   bool // ";" parameters part of their segment (nginx, Go, Node.js)
	splitSlashes bool // %2F and %5C separators (nginx; Apache with AllowEncodedSlashes On)
	segments     segmentForm
}

// segmentForm is how a reading treats empty and dot segments.
type segmentForm uint8

const (
	tomcatForm  segmentForm = iota // empty segments dropped, dot segments resolved (Tomcat, nginx, Go's path.Clean)
	windowsForm                    // tomcatForm, trailing dots and spaces stripped from each segment (IIS, Windows)
	rfcForm                        // empty segments kept, dot segments resolved (RFC 3986: Node.js's URL, Python's urljoin, Jetty)
	netPathForm                    // rfcForm after a leading "//host" (a URL parser given a base: new URL(path, base))
	rawForm                        // nothing resolved (routers that match the path as sent: Express, Flask, gin)
)

// read returns the path the reading rd of p gives, decoded, for matching:
// "/" and segments joined by "/". A slash decoded inside a segment is NUL
// there, which no path prefix holds. The zero reading, Tomcat's, decides.
func (p *parsedPath) read(rd reading) string {
	if p.segs == nil {
		if len(p.raw) > 1 {
			return strings.TrimSuffix(p.raw, "/")
		}
		return p.raw
	}
	segs, form := p.segs, rd.segments
	if form == netPathForm {
		// Every leading slash goes, then the host (WHATWG URL's special
		// authority state), and the rest is resolved as RFC 3986 says.
		i := 0
		for i < len(segs)-1 && segs[i].name == "" && !segs[i].hasParams {
			i++
		}
		segs, form = segs[i+1:], rfcForm
	}
	b := make([]byte, 0, 64)
	for _, s := range segs {
		d := s.decoded
		if rd.keepParams && s.hasParams {
			d = unescape(s.name + ";" + s.params)
		}
		if !rd.splitSlashes {
			b = pushSegment(b, d, form, true)
			continue
		}
		for {
			i := strings.IndexAny(d, "/\\")
			if i < 0 {
				b = pushSegment(b, d, form, false)
				break
			}
			b = pushSegment(b, d[:i], form, false)
			d = d[i+1:]
		}
	}
	if len(b) == 0 {
		return "/"
	}
	return string(b)
}

// pushSegment appends "/" and the segment s to path b as form reads it:
// for a dot segment it drops b's last segment instead (empty ones too under
// rfcForm), and it writes nothing for "." or, but under rfcForm, an empty
// segment; rawForm appends every segment as it is. With hideSlashes a
// slash inside s is written as NUL.
func pushSegment(b []byte, s string, form segmentForm, hideSlashes bool) []byte {
	if form == windowsForm {
		s = trimWindows(s)
	}
	switch {
	case form == rawForm:
	case s == "" && form == rfcForm:
		return append(b, '/')
	case s == "", s == ".":
		return b
	case s == "..":
		if i := bytes.LastIndexByte(b, '/'); i >= 0 {
			b = b[:i]
		}
		return b
	}
	b = append(b, '/')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if hideSlashes && c == '/' {
			c = 0
		}
		b = append(b, c)
	}
	return b
}

// trimWindows strips the trailing spaces and dots Windows ignores in a
// file name; what is left of a name of dots and spaces alone is ".".
func trimWindows(s string) string {
	t := strings.TrimRight(s, " ")
	if t == "." || t == ".." {
		return t
	}
	if t = strings.TrimRight(t, ". "); t == "" {
		return "."
	}
	return t
}

// canonical returns the path to forward: Tomcat's reading (the one that
// decides), from the normalised segments, with their parameters when
// keepParams. A last segment that is empty or a dot segment leaves a
// trailing slash, as RFC 3986's remove_dot_segments does.
func (p *parsedPath) canonical(keepParams bool) string {
	if p.segs == nil {
		return p.raw
	}
	kept := make([]int, 0, len(p.segs))
	trailing := false
	for i, s := range p.segs {
		switch s.decoded {
		case "", ".":
			trailing = true
		case "..":
			if len(kept) > 0 {
				kept = kept[:len(kept)-1]
			}
			trailing = true
		default:
			kept = append(kept, i)
			trailing = false
		}
	}
	var b strings.Builder
	for _, i := range kept {
		s := &p.segs[i]
		b.WriteByte('/')
		b.WriteString(s.name)
		if keepParams && s.hasParams {
			b.WriteByte(';')
			b.WriteString(s.params)
		}
	}
	if trailing || b.Len() == 0 {
		b.WriteByte('/')
	}
	return b.String()
}

// hidesDotSegment reports whether a raw segment holding an encoded slash
// has a dot segment (parameters stripped) between its decoded slashes.
func hidesDotSegment(seg string) bool {
	d := unescape(seg)
	if strings.IndexFunc(d, isSlash) < 0 {
		return false
	}
	for _, piece := range strings.FieldsFunc(d, isSlash) {
		if name, _, _ := strings.Cut(piece, ";"); name == "." || name == ".." {
			return true
		}
	}
	return false
}

// decodesCleanly reports whether decoded text is UTF-8 and not double
// encoded.
func decodesCleanly(d string) bool { return utf8.ValidString(d) && !doubleEncoded(d) }

// doubleEncoded reports whether a decoded path still holds the escape of a
// character refused or given a meaning above: decoded once more, as some
// applications do, it would change the path's meaning.
func doubleEncoded(d string) bool {
	for i := 0; i+2 < len(d); i++ {
		if d[i] != '%' || !ishex(d[i+1]) || !ishex(d[i+2]) {
			continue
		}
		switch b := unhex(d[i+1])<<4 | unhex(d[i+2]); {
		case b < 0x20 || b == 0x7f || b == '.' || b == '/' || b == '\\' || b == ';' || b == '%':
			return true
		}
	}
	return false
}

// normEscapes decodes the escapes of unreserved characters, writes the
// other escapes in upper case and encodes the characters that may not
// appear raw, leaving reserved characters as they were: raw or encoded,
// they mean different things (RFC 3986 §2.2).
func normEscapes(s string) string {
	i := 0
	for i < len(s) && s[i] != '%' && rawByte(s[i]) {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2]):
			c = unhex(s[i+1])<<4 | unhex(s[i+2])
			i += 2
			if unreserved(c) {
				b.WriteByte(c)
				continue
			}
		case rawByte(c):
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
	return b.String()
}

const upperHex = "0123456789ABCDEF"

// unescape decodes the escapes in s (parsePath has checked them all; one
// that is not valid would be left as it is).
func unescape(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		if c := s[i]; c == '%' && i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func isSlash(r rune) bool { return r == '/' || r == '\\' }

// unreserved reports whether c is an RFC 3986 unreserved character, which
// means the same encoded or not.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// plainByte reports whether c stands for itself in a path segment
// everywhere: unreserved, or a sub-delimiter but ';', or ':' or '@'.
func plainByte(c byte) bool {
	if unreserved(c) {
		return true
	}
	switch c {
	case '!', '$', '&', '\'', '(', ')', '*', '+', ',', '=', ':', '@':
		return true
	}
	return false
}

// rawByte reports whether c stays raw in a canonical segment or its
// parameters.
func rawByte(c byte) bool { return plainByte(c) || c == ';' }

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// CheckPathPrefix reports why prefix cannot be a rule's path prefix: it
// must start with "/" and name whole decoded segments that a request path
// can match, so no empty or dot segments, and no ';', '\', '%' or control
// characters.
func CheckPathPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if prefix[0] != '/' {
		return fmt.Errorf("path prefix %q must start with /", prefix)
	}
	if !utf8.ValidString(prefix) {
		return fmt.Errorf("path prefix %q is not UTF-8", prefix)
	}
	for _, c := range []byte(prefix) {
		if c < 0x20 || c == 0x7f || c == ';' || c == '\\' || c == '%' {
			return fmt.Errorf("path prefix %q holds %q: write the decoded path, without ; parameters or backslashes", prefix, c)
		}
	}
	if trimmed := strings.TrimSuffix(prefix, "/"); trimmed != "" {
		for _, seg := range strings.Split(trimmed[1:], "/") {
			if seg == "" || seg == "." || seg == ".." {
				return fmt.Errorf("path prefix %q has an empty or dot segment", prefix)
			}
		}
	}
	return nil
}
