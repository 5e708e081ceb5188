package secrets

import "bytes"

// compactObject is parseObject's fast path: one pass over raw (already
// checked to be UTF-8) that accepts only what parseObject accepts — one
// JSON object, no key twice in any object — and returns it as
// json.Compact would. It reports false for anything else, and for what it
// does not try to decide (a key holding an escape, which would have to be
// unescaped to be compared): the caller then takes the slow path, which
// decides, and words the refusal.
func compactObject(raw []byte) ([]byte, bool) {
	s := scanner{in: raw, out: make([]byte, 0, len(raw))}
	s.space()
	if s.i >= len(raw) || raw[s.i] != '{' {
		return nil, false
	}
	if !s.value() {
		return nil, false
	}
	s.space()
	if s.i != len(raw) {
		return nil, false
	}
	return s.out, true
}

type scanner struct {
	in  []byte
	i   int
	out []byte
}

func (s *scanner) space() {
	for s.i < len(s.in) {
		switch s.in[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// frame is an open object or array: its kind and, for an object, the
// spans of its keys so far.
type frame struct {
	object bool
	keys   [][]byte            // the first keys, compared one by one
	set    map[string]struct{} // past maxListedKeys
}

const maxListedKeys = 16

// maxFastDepth is the deepest nesting compactObject decides; deeper is
// the slow path's to decide (encoding/json refuses past 10,000 levels).
const maxFastDepth = 1000

// value scans one value at s.i (after white space), an object or an
// array with an explicit stack, so that deep nesting costs no recursion.
func (s *scanner) value() bool {
	var stack []frame
	for {
		// a value
		s.space()
		if s.i >= len(s.in) {
			return false
		}
		switch c := s.in[s.i]; {
		case c == '{' || c == '[':
			s.out = append(s.out, c)
			s.i++
			if len(stack) == maxFastDepth {
				return false
			}
			stack = append(stack, frame{object: c == '{'})
			s.space()
			if s.i < len(s.in) && s.in[s.i] == c+2 { // '}' is '{'+2, ']' is '['+2
				s.out = append(s.out, c+2)
				s.i++
				stack = stack[:len(stack)-1]
				break
			}
			if c == '{' {
				if !s.key(&stack[len(stack)-1]) {
					return false
				}
			}
			continue
		case c == '"':
			if _, ok := s.str(); !ok {
				return false
			}
		case c == 't':
			if !s.lit("true") {
				return false
			}
		case c == 'f':
			if !s.lit("false") {
				return false
			}
		case c == 'n':
			if !s.lit("null") {
				return false
			}
		case c == '-' || ('0' <= c && c <= '9'):
			if !s.number() {
				return false
			}
		default:
			return false
		}
		// after a value: a comma and the next, or the end of containers
		for {
			if len(stack) == 0 {
				return true
			}
			top := &stack[len(stack)-1]
			s.space()
			if s.i >= len(s.in) {
				return false
			}
			c := s.in[s.i]
			if c == ',' {
				s.out = append(s.out, ',')
				s.i++
				if top.object && !s.key(top) {
					return false
				}
				break
			}
			if (top.object && c != '}') || (!top.object && c != ']') {
				return false
			}
			s.out = append(s.out, c)
			s.i++
			stack = stack[:len(stack)-1]
		}
	}
}

// key scans an object's key and its colon, and refuses a key the object
// holds already (or one with an escape: see compactObject).
func (s *scanner) key(f *frame) bool {
	s.space()
	if s.i >= len(s.in) || s.in[s.i] != '"' {
		return false
	}
	k, ok := s.str()
	if !ok || bytes.IndexByte(k, '\\') >= 0 {
		return false
	}
	if f.set != nil {
		if _, dup := f.set[string(k)]; dup {
			return false
		}
		f.set[string(k)] = struct{}{}
	} else {
		for _, seen := range f.keys {
			if bytes.Equal(seen, k) {
				return false
			}
		}
		f.keys = append(f.keys, k)
		if len(f.keys) > maxListedKeys {
			f.set = make(map[string]struct{}, 2*maxListedKeys)
			for _, seen := range f.keys {
				f.set[string(seen)] = struct{}{}
			}
			f.keys = nil
		}
	}
	s.space()
	if s.i >= len(s.in) || s.in[s.i] != ':' {
		return false
	}
	s.out = append(s.out, ':')
	s.i++
	return true
}

// str scans a string at s.i and returns its content as written (between
// the quotes, escapes as they are).
func (s *scanner) str() ([]byte, bool) {
	start := s.i
	s.i++ // '"'
	for s.i < len(s.in) {
		c := s.in[s.i]
		switch {
		case c == '"':
			s.i++
			s.out = append(s.out, s.in[start:s.i]...)
			return s.in[start+1 : s.i-1], true
		case c < 0x20:
			return nil, false
		case c == '\\':
			if s.i+1 >= len(s.in) {
				return nil, false
			}
			switch s.in[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.in) {
					return nil, false
				}
				for _, h := range s.in[s.i+2 : s.i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return nil, false
					}
				}
				s.i += 6
			default:
				return nil, false
			}
		default:
			s.i++
		}
	}
	return nil, false
}

func (s *scanner) lit(word string) bool {
	if !bytes.HasPrefix(s.in[s.i:], []byte(word)) {
		return false
	}
	s.out = append(s.out, word...)
	s.i += len(word)
	return true
}

// number scans -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	start := s.i
	if s.in[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.in) && s.in[s.i] == '0':
		s.i++
	case s.i < len(s.in) && '1' <= s.in[s.i] && s.in[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.i < len(s.in) && s.in[s.i] == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if s.i < len(s.in) && (s.in[s.i] == 'e' || s.in[s.i] == 'E') {
		s.i++
		if s.i < len(s.in) && (s.in[s.i] == '+' || s.in[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	s.out = append(s.out, s.in[start:s.i]...)
	return true
}

// digits scans one or more digits.
func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.in) && '0' <= s.in[s.i] && s.in[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}
