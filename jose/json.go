package jose

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// A strict, allocation-free JSON scanner for JOSE headers and JWT claims.
// encoding/json is both too lenient for a verifier (it accepts duplicate
// member names, invalid UTF-8 and any nesting) and too slow for the request
// path, so the few shapes JOSE needs are read here directly: one top-level
// object whose members are strings, numbers or arrays of strings, and any
// other value skipped but fully validated (RFC 8259 grammar).

// maxDepth bounds nesting so that a hostile token cannot exhaust the stack.
const maxDepth = 32

// maxMembers bounds top-level members so that duplicate detection stays cheap.
const maxMembers = 128

// maxHeaderMembers bounds protected header members; real headers have a handful.
const maxHeaderMembers = 32

type scanner struct {
	b []byte
	i int
}

var (
	errJSONSyntax    = reject(ReasonMalformed, "invalid JSON")
	errJSONDepth     = reject(ReasonMalformed, "JSON nested too deeply")
	errJSONNotObject = reject(ReasonMalformed, "JSON value is not an object")
	errJSONTrailing  = reject(ReasonMalformed, "trailing data after JSON object")
	errJSONDuplicate = reject(ReasonMalformed, "duplicate member name")
	errJSONMembers   = reject(ReasonMalformed, "too many members")
	errJSONUTF8      = reject(ReasonMalformed, "invalid UTF-8 in JSON string")
	errJSONNumber    = reject(ReasonMalformed, "invalid JSON number")
)

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (s *scanner) ws() {
	// Compact JSON has no white space; test that case with one comparison.
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return
	}
	for s.i < len(s.b) && isSpace(s.b[s.i]) {
		s.i++
	}
}

// peek returns the next non-space byte, or 0 at the end of input.
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// expect consumes c, after any white space, if it comes next. c is never
// white space, so when it is the very next byte no white space can precede
// it: that one test settles compact JSON.
func (s *scanner) expect(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return s.expectSpaced(c)
}

func (s *scanner) expectSpaced(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// str reads a string and returns the bytes between its quotes, still
// escaped, and whether they contain any escape.
func (s *scanner) str() (raw []byte, escaped bool, err error) {
	if s.peek() != '"' {
		return nil, false, errJSONSyntax
	}
	return s.strBody()
}

// plainStr reads a string without escapes or bytes outside printable ASCII
// whose opening quote the caller has seen at s.i, which is most strings in a
// token, in one SWAR scan. It reports false, having consumed nothing, for
// any other string, which strBody then reads.
func (s *scanner) plainStr() ([]byte, bool) {
	b := s.b[s.i+1:]
	n := plainRun(b)
	if n < len(b) && b[n] == '"' {
		s.i += n + 2
		return b[:n:n], true
	}
	return nil, false
}

// strBody is str for a caller that has seen the opening quote at s.i.
func (s *scanner) strBody() (raw []byte, escaped bool, err error) {
	s.i++
	start := s.i
	b := s.b
	for {
		i := s.i + plainRun(b[s.i:])
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		s.i = i
		if i >= len(b) {
			return nil, false, errJSONSyntax
		}
		switch c := b[i]; {
		case c == '"':
			s.i++
			return b[start:i], escaped, nil
		case c == '\\':
			escaped = true
			if err := s.escape(); err != nil {
				return nil, false, err
			}
		case c < 0x20:
			return nil, false, errJSONSyntax
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return nil, false, errJSONUTF8
			}
			s.i += n
		}
	}
}

// plainByte marks the bytes a string may hold as they are: printable ASCII
// other than '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plainRun returns how many leading bytes of b are plain string content:
// printable ASCII other than '"' and '\\'. It tests eight bytes at a time
// (SWAR), since claim strings are most of a token and almost always plain,
// and finds the first special byte within a word from the lowest flag: a
// byte's flag can be wrong only through a borrow out of a lower byte, and
// only a special byte borrows, so the lowest flag is exact. Only the last
// bytes of b, fewer than eight, are left to the caller to test one by one.
//
// A byte equal to '"' or '\\' becomes zero under its XOR, and subtracting
// one sets its high bit; a byte below 0x20 sets it in x - 0x20. The usual
// zero-byte test also masks with the complement of the XOR, so as not to
// flag bytes of 0x81 and above; here those are special too, and left
// flagged: a byte of 0x80 or above keeps its high bit under both XORs, and
// subtracting one clears it only where the XOR gave exactly 0x80, which the
// two XORs cannot both give. So neither that mask nor a test of x's own
// high bits is needed.
func plainRun(b []byte) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	// Reslicing b, rather than indexing it at n, leaves the compiler no
	// bounds check to make in the loop.
	n := 0
	for len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		quote := x ^ (ones * '"')
		slash := x ^ (ones * '\\')
		special := ((quote - ones) | (slash - ones) | (x - ones*0x20)) & highs
		if special != 0 {
			return n + bits.TrailingZeros64(special)/8
		}
		n += 8
		b = b[8:]
	}
	return n
}

// escape validates one escape sequence starting at the backslash.
func (s *scanner) escape() error {
	if s.i+1 >= len(s.b) {
		return errJSONSyntax
	}
	switch s.b[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return nil
	case 'u':
		if s.i+6 > len(s.b) {
			return errJSONSyntax
		}
		if _, ok := hex4(s.b[s.i+2 : s.i+6]); !ok {
			return errJSONSyntax
		}
		s.i += 6
		return nil
	}
	return errJSONSyntax
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// unescape appends the decoded form of a validated escaped string to dst.
// Lone surrogates become U+FFFD, as encoding/json does.
func unescape(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		e := raw[i+1]
		i += 2
		switch e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(raw[i:])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2, _ = hex4(raw[i+2:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
	}
	return dst
}

// number reads a JSON number and returns its text.
func (s *scanner) number() ([]byte, error) {
	s.ws()
	start := s.i
	b := s.b
	i := s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return nil, errJSONNumber
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, errJSONNumber
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, errJSONNumber
		}
	}
	s.i = i
	return b[start:i], nil
}

func (s *scanner) literal(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return errJSONSyntax
	}
	s.i += len(word)
	return nil
}

// skip validates and steps over any JSON value at the given depth.
func (s *scanner) skip(depth int) error {
	if depth > maxDepth {
		return errJSONDepth
	}
	switch s.peek() {
	case '"':
		if _, ok := s.plainStr(); ok {
			return nil
		}
		_, _, err := s.strBody()
		return err
	case '{':
		s.i++
		if s.expect('}') {
			return nil
		}
		for {
			if _, _, err := s.str(); err != nil {
				return err
			}
			if !s.expect(':') {
				return errJSONSyntax
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			if s.expect('}') {
				return nil
			}
			if !s.expect(',') {
				return errJSONSyntax
			}
		}
	case '[':
		s.i++
		if s.expect(']') {
			return nil
		}
		for {
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			if s.expect(']') {
				return nil
			}
			if !s.expect(',') {
				return errJSONSyntax
			}
		}
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	case 0:
		return errJSONSyntax
	default:
		_, err := s.number()
		return err
	}
}

// name reads a member name. An escaped name is decoded into arena so that
// "a" and "\u0061" compare equal when duplicates are looked for.
func (s *scanner) name(arena *[]byte) ([]byte, error) {
	raw, esc, err := s.str()
	if err != nil {
		return nil, err
	}
	if esc {
		raw = appendArena(arena, raw)
	}
	if !s.expect(':') {
		return nil, errJSONSyntax
	}
	return raw, nil
}

// appendArena unescapes raw onto the end of arena and returns the decoded
// bytes. Bytes once written to the arena are never changed, so strings viewing
// them stay valid even when a later append moves the arena elsewhere.
func appendArena(arena *[]byte, raw []byte) []byte {
	start := len(*arena)
	*arena = unescape(*arena, raw)
	return (*arena)[start:]
}

// stringValue reads a string value whose opening quote the caller has seen
// at s.i, decoding escapes into arena if needed.
func (s *scanner) stringValue(arena *[]byte) ([]byte, error) {
	raw, esc, err := s.strBody()
	if err != nil {
		return nil, err
	}
	if esc {
		raw = appendArena(arena, raw)
	}
	return raw, nil
}

// end checks that only white space follows the top-level value.
func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return errJSONTrailing
	}
	return nil
}
