package vaultapi

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Request bodies. A transit request is one JSON object whose members are
// Vault's parameters, one of which, batch_input, may be an array of
// objects. It is read here in one pass into spans of the body (strings
// without escapes are not copied), and each parameter is converted when a
// handler asks for it, as leniently as Vault's field decoding: where Vault
// takes a string, a number or a boolean is taken as its text; where it
// takes an integer or a boolean, a string holding one is taken too.
//
// Stricter than Vault, which decodes with encoding/json into a map: a
// member name given twice, invalid UTF-8, more than maxMembers members in
// an object and nesting deeper than maxDepth are refused (400), so that no
// two parsers can read one body differently and no body costs more than
// its length.

const (
	maxDepth   = 32 // nesting of values that are skipped
	maxMembers = 64 // members of one object (a request, or a batch item)
)

// kind is a JSON value's type.
type kind uint8

const (
	kNull kind = iota
	kString
	kNumber
	kBool
	kArray
	kObject
)

// member is one member of an object: its name and its value's text (for a
// string, its content unescaped; for a number or true/false, the literal).
// A batch_input array records the range of its items in request.items.
type member struct {
	name   []byte
	kind   kind
	text   []byte
	lo, hi int // kArray batch_input: items[lo:hi]
}

// item is a batch_input element: its members are request.imem[lo:hi].
type item struct{ lo, hi int }

// request is a decoded request body or query.
type request struct {
	top   []member
	items []item
	imem  []member
}

func (q *request) reset() {
	q.top, q.items, q.imem = q.top[:0], q.items[:0], q.imem[:0]
}

// badRequest is a 400 with a message for the caller.
type badRequest string

func (e badRequest) Error() string { return string(e) }

var (
	errSyntax    = badRequest("error parsing JSON: invalid JSON")
	errNotObject = badRequest("error parsing JSON: the body is not a JSON object")
	errDepth     = badRequest("error parsing JSON: nested too deeply")
	errMembers   = badRequest("error parsing JSON: too many members in an object")
	errUTF8      = badRequest("error parsing JSON: invalid UTF-8")
	errBatch     = badRequest("failed to parse batch input: batch_input must be an array of objects")
)

// decode reads body into q. An empty body (or only white space), or null
// (what Vault's Go client sends for a write without data), is an empty
// request.
func (q *request) decode(body []byte) error {
	q.reset()
	d := decoder{b: body}
	d.ws()
	if d.i == len(d.b) {
		return nil
	}
	if d.b[d.i] == 'n' {
		if err := d.literal("null"); err != nil {
			return errNotObject
		}
		if d.ws(); d.i != len(d.b) {
			return errSyntax
		}
		return nil
	}
	if d.b[d.i] != '{' {
		return errNotObject
	}
	var err error
	if q.top, err = d.object(q.top, q, true); err != nil {
		return err
	}
	d.ws()
	if d.i != len(d.b) {
		return errSyntax
	}
	return nil
}

type decoder struct {
	b []byte
	i int
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// object reads an object's members into ms. At the top level, a member
// batch_input that is an array is read into q's items.
func (d *decoder) object(ms []member, q *request, top bool) ([]member, error) {
	start := len(ms)
	d.i++ // '{'
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return ms, nil
	}
	for {
		d.ws()
		name, err := d.str()
		if err != nil {
			return nil, err
		}
		for _, m := range ms[start:] {
			if string(m.name) == string(name) {
				return nil, badRequest("error parsing JSON: member " + strconv.Quote(string(name)) + " given twice")
			}
		}
		if len(ms)-start >= maxMembers {
			return nil, errMembers
		}
		d.ws()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return nil, errSyntax
		}
		d.i++
		d.ws()
		m := member{name: name}
		if top && string(m.name) == "batch_input" && d.i < len(d.b) && d.b[d.i] == '[' {
			m.kind = kArray
			if m.lo, m.hi, err = d.batch(q); err != nil {
				return nil, err
			}
		} else if m.kind, m.text, err = d.value(0); err != nil {
			return nil, err
		}
		ms = append(ms, m)
		d.ws()
		if d.i >= len(d.b) {
			return nil, errSyntax
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return ms, nil
		default:
			return nil, errSyntax
		}
	}
}

// batch reads batch_input's items, each an object.
func (d *decoder) batch(q *request) (lo, hi int, err error) {
	d.i++ // '['
	lo = len(q.items)
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return lo, lo, nil
	}
	for {
		d.ws()
		if d.i >= len(d.b) || d.b[d.i] != '{' {
			if _, _, err := d.value(0); err != nil {
				return 0, 0, err
			}
			return 0, 0, errBatch
		}
		it := item{lo: len(q.imem)}
		if q.imem, err = d.object(q.imem, q, false); err != nil {
			return 0, 0, err
		}
		it.hi = len(q.imem)
		q.items = append(q.items, it)
		d.ws()
		if d.i >= len(d.b) {
			return 0, 0, errSyntax
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return lo, len(q.items), nil
		default:
			return 0, 0, errSyntax
		}
	}
}

// value reads any value; strings come back unescaped, numbers and literals
// as their text, arrays and objects validated and skipped.
func (d *decoder) value(depth int) (kind, []byte, error) {
	if d.i >= len(d.b) {
		return 0, nil, errSyntax
	}
	switch c := d.b[d.i]; {
	case c == '"':
		s, err := d.str()
		return kString, s, err
	case c == '-' || c >= '0' && c <= '9':
		n, err := d.number()
		return kNumber, n, err
	case c == 't' || c == 'f':
		start, w := d.i, "true"
		if c == 'f' {
			w = "false"
		}
		if err := d.literal(w); err != nil {
			return 0, nil, err
		}
		return kBool, d.b[start:d.i], nil
	case c == 'n':
		return kNull, nil, d.literal("null")
	case c == '[' || c == '{':
		if depth >= maxDepth {
			return 0, nil, errDepth
		}
		return d.skip(depth)
	}
	return 0, nil, errSyntax
}

func (d *decoder) literal(w string) error {
	if len(d.b)-d.i < len(w) || string(d.b[d.i:d.i+len(w)]) != w {
		return errSyntax
	}
	d.i += len(w)
	return nil
}

// skip validates an array or object it does not keep.
func (d *decoder) skip(depth int) (kind, []byte, error) {
	open := d.b[d.i]
	k, end := kArray, byte(']')
	if open == '{' {
		k, end = kObject, '}'
	}
	d.i++
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == end {
		d.i++
		return k, nil, nil
	}
	for {
		d.ws()
		if k == kObject {
			if _, err := d.str(); err != nil {
				return 0, nil, err
			}
			d.ws()
			if d.i >= len(d.b) || d.b[d.i] != ':' {
				return 0, nil, errSyntax
			}
			d.i++
			d.ws()
		}
		if _, _, err := d.value(depth + 1); err != nil {
			return 0, nil, err
		}
		d.ws()
		if d.i >= len(d.b) {
			return 0, nil, errSyntax
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case end:
			d.i++
			return k, nil, nil
		default:
			return 0, nil, errSyntax
		}
	}
}

// str reads a string. Its content is returned as a view of the body when
// it has no escape, else unescaped by encoding/json into a new slice
// (Vault clients escape only what JSON requires, so that is rare).
func (d *decoder) str() ([]byte, error) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, errSyntax
	}
	start := d.i
	d.i++
	escaped := false
	for d.i < len(d.b) {
		d.i += plainRun(d.b[d.i:])
		for d.i < len(d.b) && plain[d.b[d.i]] {
			d.i++
		}
		if d.i >= len(d.b) {
			break
		}
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			if !escaped {
				return d.b[start+1 : d.i-1], nil
			}
			var s string
			if err := json.Unmarshal(d.b[start:d.i], &s); err != nil {
				return nil, errSyntax
			}
			return []byte(s), nil
		case c == '\\':
			escaped = true
			if d.i+1 >= len(d.b) {
				return nil, errSyntax
			}
			switch d.b[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				if d.i+6 > len(d.b) {
					return nil, errSyntax
				}
				for _, h := range d.b[d.i+2 : d.i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return nil, errSyntax
					}
				}
				d.i += 6
			default:
				return nil, errSyntax
			}
		case c < 0x20:
			return nil, errSyntax
		case c < utf8.RuneSelf:
			d.i++
		default:
			r, n := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && n == 1 {
				return nil, errUTF8
			}
			d.i += n
		}
	}
	return nil, errSyntax
}

// plain marks the bytes a string holds as they are: printable ASCII but
// the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plainRun returns how many leading bytes of b are plain string content
// (printable ASCII, DEL too, other than '"' and '\\'), testing eight bytes
// at a time: a plaintext's base64 is most of an encrypt request and always
// plain, and a byte at a time it cost more than the seal. The last bytes,
// fewer than eight, and the first special byte's word from that byte on,
// are left to the table. (As jose's plainRun, whose comment shows why the
// lowest flag is exact and bytes of 0x80 and above are flagged.)
func plainRun(b []byte) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
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

// number reads a number as RFC 8259 spells it.
func (d *decoder) number() ([]byte, error) {
	start := d.i
	digits := func() int {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.b[d.i] == '-' {
		d.i++
	}
	switch n := digits(); {
	case n == 0:
		return nil, errSyntax
	case n > 1 && d.b[d.i-n] == '0':
		return nil, errSyntax
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return nil, errSyntax
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return nil, errSyntax
		}
	}
	return d.b[start:d.i], nil
}

// fromQuery makes a request of URL query parameters (a read's parameters,
// as Vault takes them): each parameter's first value, as a string.
func (q *request) fromQuery(v url.Values) {
	q.reset()
	for name, vs := range v {
		if len(vs) > 0 && len(q.top) < maxMembers {
			q.top = append(q.top, member{name: []byte(name), kind: kString, text: []byte(vs[0])})
		}
	}
}

// Parameters, as handlers read them.

// get returns the member named name among ms, or nil; a null member is
// absent.
func get(ms []member, name string) *member {
	for i := range ms {
		if string(ms[i].name) == name {
			if ms[i].kind == kNull {
				return nil
			}
			return &ms[i]
		}
	}
	return nil
}

func (q *request) get(name string) *member { return get(q.top, name) }

// batch returns the batch_input items, and whether batch_input was given.
// A batch_input that is not an array of objects is refused when read.
func (q *request) batch() ([]item, bool, error) {
	m := get(q.top, "batch_input")
	if m == nil {
		return nil, false, nil
	}
	if m.kind != kArray {
		return nil, true, errBatch
	}
	return q.items[m.lo:m.hi], true, nil
}

func (q *request) members(it item) []member { return q.imem[it.lo:it.hi] }

func typeError(name []byte, want string) error {
	return badRequest("'" + string(name) + "' expected type '" + want + "', got unconvertible type")
}

// str is a string parameter, as Vault's weak decoding reads one: a string,
// or the text of a number, or "1"/"0" for a boolean.
func (m *member) str() ([]byte, error) {
	switch m.kind {
	case kString, kNumber:
		return m.text, nil
	case kBool:
		if m.text[0] == 't' {
			return []byte("1"), nil
		}
		return []byte("0"), nil
	}
	return nil, typeError(m.name, "string")
}

// strictStr is a batch item's string member: a string only, as Vault's
// batch decoding takes it.
func (m *member) strictStr() ([]byte, error) {
	if m.kind == kString {
		return m.text, nil
	}
	return nil, typeError(m.name, "string")
}

// integer is an integer parameter: a number without fraction or exponent,
// a string holding one (Go's syntax: "0x1f" too, as mapstructure reads
// it; "" is 0), or 1/0 for a boolean.
func (m *member) integer() (int, error) {
	switch m.kind {
	case kNumber, kString:
		s := string(m.text)
		if s == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(s, 0, 64)
		if err != nil || int64(int(n)) != n {
			return 0, badRequest("'" + string(m.name) + "' is not an integer")
		}
		return int(n), nil
	case kBool:
		if m.text[0] == 't' {
			return 1, nil
		}
		return 0, nil
	}
	return 0, typeError(m.name, "int")
}

// boolean is a boolean parameter: true/false, or a string or number that
// strconv.ParseBool reads ("" is false).
func (m *member) boolean() (bool, error) {
	switch m.kind {
	case kBool:
		return m.text[0] == 't', nil
	case kString, kNumber:
		if len(m.text) == 0 {
			return false, nil
		}
		b, err := strconv.ParseBool(string(m.text))
		if err != nil {
			return false, badRequest("'" + string(m.name) + "' is not a boolean")
		}
		return b, nil
	}
	return false, typeError(m.name, "bool")
}

// seconds is a duration parameter as Vault's TypeDurationSecond reads it:
// a number of seconds, or a string: "" (0), a number of seconds, a Go
// duration ending in s, m or h ("90m", "1h30m"), or days ("7d").
func (m *member) seconds() (time.Duration, error) {
	bad := badRequest("'" + string(m.name) + "' is not a duration")
	var d time.Duration
	switch s := string(m.text); {
	case m.kind != kNumber && m.kind != kString:
		return 0, typeError(m.name, "duration")
	case s == "":
	case m.kind == kNumber || strings.Trim(s, "0123456789") == "":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f > float64(1<<62)/float64(time.Second) {
			return 0, bad
		}
		d = time.Duration(f) * time.Second
	case strings.HasSuffix(s, "d"):
		n, err := strconv.ParseInt(strings.TrimSuffix(s, "d"), 10, 32)
		if err != nil {
			return 0, bad
		}
		d = time.Duration(n) * 24 * time.Hour
	default:
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, bad
		}
	}
	if d < 0 {
		return 0, badRequest("'" + string(m.name) + "' cannot be negative")
	}
	return d, nil
}
