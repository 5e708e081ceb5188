package jose

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"unsafe"
)

// DefaultMaxTokenSize is the size limit Parse applies before decoding.
const DefaultMaxTokenSize = 8 << 10

// Header holds the protected header members a verifier acts on. Members that
// could point at keys (jku, x5u, jwk, x5c) are deliberately not exposed.
type Header struct {
	Alg         Alg
	KeyID       string // "kid"
	Type        string // "typ"
	ContentType string // "cty"
	raw         string // the decoded header, a view of the Token's buffer
}

// JSON returns the decoded protected header. It must not be modified: the
// tokens a Verifier parses under the same header share it.
func (h *Header) JSON() []byte { return bytesOf(h.raw) }

// Token is a parsed compact JWS. Its strings are views into one buffer that
// is never written after parsing, so a Token may be read from many goroutines.
// Parsing does not verify: call [Key.Verify] or use a [Verifier].
type Token struct {
	Header Header
	Claims Claims

	raw     string // the compact token as given
	payload []byte // decoded payload
	sig     []byte // decoded signature

	signedLen    int32 // length of the signing input: header "." payload
	headerCached bool  // Header came from a Verifier's header cache
}

// Raw returns the token as it was given to Parse.
func (t *Token) Raw() string { return t.raw }

// SigningInput returns the bytes the signature covers.
func (t *Token) SigningInput() string { return t.raw[:t.signedLen] }

// Payload returns the decoded payload.
func (t *Token) Payload() []byte { return t.payload }

// Signature returns the decoded signature.
func (t *Token) Signature() []byte { return t.sig }

var (
	errTooLarge       = reject(ReasonTooLarge, "token exceeds the size limit")
	errSegments       = reject(ReasonMalformed, "token must have exactly three segments")
	errBase64         = reject(ReasonMalformed, "segment is not strict base64url")
	errEmptySegment   = reject(ReasonMalformed, "empty header or signature segment")
	errNoAlg          = reject(ReasonMalformed, "header has no alg")
	errUnsupportedAlg = reject(ReasonUnsupportedAlg, "alg is not supported")
	errCrit           = reject(ReasonMalformed, "header names a critical extension that is not understood")
	errHeaderType     = reject(ReasonMalformed, "header member has the wrong type")
	errClaimType      = reject(ReasonMalformed, "registered claim has the wrong type")
	errDateRange      = reject(ReasonMalformed, "numeric date out of range")
)

// b64 is for encoding, and for decoding off the request path (JWK members);
// Strict refuses non-zero trailing bits. Tokens are decoded by decodeB64.
var b64 = base64.RawURLEncoding.Strict()

// Parse splits and decodes a compact JWT without verifying it. The payload
// must be a JSON object. Tokens over DefaultMaxTokenSize are refused.
func Parse(token string) (*Token, error) {
	return parse(nil, token, DefaultMaxTokenSize, true, nil)
}

// ParseJWS is Parse for a compact JWS whose payload is arbitrary bytes rather
// than JWT claims; its Claims are empty.
func ParseJWS(token string, maxSize int) (*Token, error) {
	return parse(nil, token, maxSize, false, nil)
}

// ParseInto is Parse into a caller-owned Token, with an explicit size limit;
// it lets a hot path reuse a Token's storage.
func ParseInto(t *Token, token string, maxSize int) error {
	*t = Token{}
	_, err := parse(t, token, maxSize, true, nil)
	return err
}

// parse fills t, which must be zero, and returns it; given a nil t, it
// allocates the Token together with its buffer (see newToken). On error the
// Token is nil.
func parse(t *Token, token string, maxSize int, jwt bool, hc *headerCache) (*Token, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxTokenSize
	}
	if len(token) > maxSize || len(token) > math.MaxInt32 {
		return nil, errTooLarge
	}
	d1 := strings.IndexByte(token, '.')
	if d1 < 0 {
		return nil, errSegments
	}
	d2 := strings.IndexByte(token[d1+1:], '.')
	if d2 < 0 {
		return nil, errSegments
	}
	d2 += d1 + 1
	if strings.IndexByte(token[d2+1:], '.') >= 0 {
		return nil, errSegments
	}
	hs, ps, ss := token[:d1], token[d1+1:d2], token[d2+1:]
	if len(hs) == 0 {
		return nil, errEmptySegment
	}
	cached := hc.get(hs)
	hl, pl, sl := decodedLen(len(hs)), decodedLen(len(ps)), decodedLen(len(ss))
	if hl < 0 || pl < 0 || sl < 0 {
		return nil, errBase64
	}
	if cached != nil {
		hl = 0
	}
	// One allocation holds the decoded header, payload and signature, and
	// the Token too when the caller has none. Escaped strings are decoded
	// into an arena, allocated only when some string needs it (see
	// Claims.parse).
	var buf []byte
	if t == nil {
		t, buf = newToken(hl + pl + sl)
	} else {
		buf = make([]byte, hl+pl+sl)
	}
	if cached == nil && !decodeB64(buf[:hl], hs) {
		return nil, errBase64
	}
	if !decodeB64(buf[hl:hl+pl], ps) || !decodeB64(buf[hl+pl:], ss) {
		return nil, errBase64
	}
	t.raw, t.signedLen = token, int32(d2)
	t.payload = buf[hl : hl+pl : hl+pl]
	t.sig = buf[hl+pl:]
	var arena []byte
	if cached != nil {
		t.Header = *cached
		t.headerCached = true
	} else if err := t.Header.parse(buf[:hl:hl], &arena); err != nil {
		return nil, err
	}
	// The empty signature is refused after the header is read, so that an
	// unsecured JWS ("alg":"none", RFC 7515 §A.5) is reported as unsupported_alg.
	if len(ss) == 0 {
		return nil, errEmptySegment
	}
	if jwt {
		if err := t.Claims.parse(t.payload, &arena); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (h *Header) parse(b []byte, arena *[]byte) error {
	h.raw = stringOf(b)
	s := scanner{b: b}
	if !s.expect('{') {
		return errJSONNotObject
	}
	var seen [maxHeaderMembers][]byte
	n := 0
	if !s.expect('}') {
		for {
			name, err := s.name(arena)
			if err != nil {
				return err
			}
			if n == maxHeaderMembers {
				return errJSONMembers
			}
			for _, prev := range seen[:n] {
				if string(prev) == string(name) {
					return errJSONDuplicate
				}
			}
			seen[n] = name
			n++
			if err := h.member(&s, name, arena); err != nil {
				return err
			}
			if s.expect('}') {
				break
			}
			if !s.expect(',') {
				return errJSONSyntax
			}
		}
	}
	if err := s.end(); err != nil {
		return err
	}
	if h.Alg == 0 {
		return errNoAlg
	}
	return nil
}

func (h *Header) member(s *scanner, name []byte, arena *[]byte) error {
	var dst *string
	switch string(name) {
	case "alg":
		if s.peek() != '"' {
			return errHeaderType
		}
		v, err := s.stringValue(arena)
		if err != nil {
			return err
		}
		if h.Alg = lookupAlg(string(v)); h.Alg == 0 {
			return errUnsupportedAlg
		}
		return nil
	case "crit":
		// keygate implements no JWS extension, so any crit entry is one it
		// does not understand (RFC 7515 §4.1.11).
		return errCrit
	case "kid":
		dst = &h.KeyID
	case "typ":
		dst = &h.Type
	case "cty":
		dst = &h.ContentType
	default:
		return s.skip(1)
	}
	if s.peek() != '"' {
		return errHeaderType
	}
	v, err := s.stringValue(arena)
	if err != nil {
		return err
	}
	*dst = stringOf(v)
	return nil
}

// NumericDate is a JWT time (RFC 7519 §2) in whole seconds since the epoch;
// Valid reports whether the claim was present.
type NumericDate struct {
	Unix  int64
	Valid bool
}

// maxNumericDate is 9999-12-31T23:59:59Z; larger dates are refused as
// malformed rather than silently overflowing arithmetic.
const maxNumericDate = 253402300799

func parseNumericDate(s *scanner) (NumericDate, error) {
	c := s.peek()
	if c != '-' && (c < '0' || c > '9') {
		return NumericDate{}, errClaimType
	}
	// The usual date, 1 to 15 digits without a leading zero, fraction or
	// exponent, is read in one pass; anything else takes the general path,
	// which reads exactly the same text for such a date.
	if c >= '1' {
		b, i := s.b, s.i
		var v int64
		if len(b)-i >= 8 {
			if d, ok := eightDigits(binary.LittleEndian.Uint64(b[i:])); ok {
				v, i = int64(d), i+8
			}
		}
		for i < len(b) && i-s.i < 16 && b[i] >= '0' && b[i] <= '9' {
			v = v*10 + int64(b[i]-'0')
			i++
		}
		if n := i - s.i; n <= 15 && (i == len(b) || b[i] != '.' && b[i] != 'e' && b[i] != 'E') {
			if v > maxNumericDate {
				return NumericDate{}, errDateRange
			}
			s.i = i
			return NumericDate{Unix: v, Valid: true}, nil
		}
	}
	return generalNumericDate(s)
}

// generalNumericDate reads any JSON number as a NumericDate: a whole
// number of up to 15 digits exactly, anything else through a float.
func generalNumericDate(s *scanner) (NumericDate, error) {
	num, err := s.number()
	if err != nil {
		return NumericDate{}, err
	}
	var v int64
	simple := len(num) <= 15
	for _, c := range num {
		if c < '0' || c > '9' {
			simple = false
			break
		}
		v = v*10 + int64(c-'0')
	}
	if !simple {
		f, err := strconv.ParseFloat(stringOf(num), 64)
		if err != nil || f < 0 || f > maxNumericDate {
			return NumericDate{}, errDateRange
		}
		v = int64(f)
	}
	if v > maxNumericDate {
		return NumericDate{}, errDateRange
	}
	return NumericDate{Unix: v, Valid: true}, nil
}

// eightDigits returns the value of the eight ASCII digits in x, the first
// in the lowest byte, and whether all eight are digits: each byte is
// checked with no carry between bytes, then pairs, quads and the two halves
// are combined with three multiplications.
func eightDigits(x uint64) (uint64, bool) {
	const ones = 0x0101010101010101
	// A byte is a digit iff its high nibble is 3 and adding 6 keeps it so.
	if x&(ones*0xF0) != ones*0x30 || (x+ones*0x06)&(ones*0xF0) != ones*0x30 {
		return 0, false
	}
	x &= ones * 0x0F
	x = (x * (10<<8 + 1)) >> 8 & 0x00FF00FF00FF00FF
	x = (x * (100<<16 + 1)) >> 16 & 0x0000FFFF0000FFFF
	x = (x * (10000<<32 + 1)) >> 32
	return x, true
}

// bytesOf views a string's bytes without copying. The result must never be
// written: it is only handed to readers (base64 decoding, hashing).
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// stringOf views bytes as a string without copying. Only used on a Token's
// buffer, which nothing writes after parsing.
func stringOf(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// tokenWith is a Token and its buffer in one allocation. Only the Token's
// fields hold pointers, so the collector never scans the buffer.
type tokenWith[B any] struct {
	t Token
	b B
}

const (
	tokenSize = unsafe.Sizeof(Token{})
	// mallocHeader is the word the Go allocator puts before an object over
	// 512 bytes that holds pointers; it counts toward the size class.
	mallocHeader = 8
)

// sizeClasses are the Go allocator's object sizes up to 8 KiB
// (runtime/sizeclasses.go); an allocation takes the smallest that holds it.
var sizeClasses = [...]uint16{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192}

// allocSize is the memory an allocation of n bytes takes (n <= 8192). It is
// two table lookups, as in the runtime (size_to_class8, size_to_class128):
// newToken asks on every parse, where a binary search over sizeClasses cost
// a measurable part of a verification.
func allocSize(n int) int {
	if n <= 1024 {
		return int(allocBy8[(n+7)>>3])
	}
	return int(allocBy128[(n-1024+127)>>7])
}

// Every size class up to 1024 bytes is a multiple of 8, and every one above
// it a multiple of 128, so these tables hold allocSize for each step.
var allocBy8, allocBy128 = func() (by8 [1024/8 + 1]uint16, by128 [(8192-1024)/128 + 1]uint16) {
	for i := 1; i < len(by8); i++ {
		by8[i] = uint16(searchSizeClass(i * 8))
	}
	for i := range by128 {
		by128[i] = uint16(searchSizeClass(1024 + i*128))
	}
	return by8, by128
}()

// searchSizeClass is the smallest size class that holds n > 0 bytes.
func searchSizeClass(n int) int {
	lo, hi := 0, len(sizeClasses)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int(sizeClasses[m]) < n {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return int(sizeClasses[lo])
}

// tokenAlloc is what a Token allocated alone takes.
var tokenAlloc = allocSize(int(tokenSize))

// newToken returns a zero Token and a zero buffer of n bytes. They are one
// allocation, which costs the allocator and the collector less than two,
// whenever that takes no more memory than the Token and the buffer apart
// (for a typical token it takes exactly as much: 896 bytes for 376 of
// payload and signature); otherwise, and past 8 KiB, they are two. Nothing
// but the Token's own views refers to the buffer.
func newToken(n int) (*Token, []byte) {
	together := n + int(tokenSize+mallocHeader)
	if together > 8192 {
		return new(Token), make([]byte, n)
	}
	size := allocSize(together)
	if size > tokenAlloc+allocSize(n) {
		return new(Token), make([]byte, n)
	}
	switch size {
	case 576:
		x := new(tokenWith[[576 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 640:
		x := new(tokenWith[[640 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 704:
		x := new(tokenWith[[704 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 768:
		x := new(tokenWith[[768 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 896:
		x := new(tokenWith[[896 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 1024:
		x := new(tokenWith[[1024 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 1152:
		x := new(tokenWith[[1152 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 1280:
		x := new(tokenWith[[1280 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 1408:
		x := new(tokenWith[[1408 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 1536:
		x := new(tokenWith[[1536 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 1792:
		x := new(tokenWith[[1792 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 2048:
		x := new(tokenWith[[2048 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 2304:
		x := new(tokenWith[[2304 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 2688:
		x := new(tokenWith[[2688 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 3072:
		x := new(tokenWith[[3072 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 3200:
		x := new(tokenWith[[3200 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 3456:
		x := new(tokenWith[[3456 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 4096:
		x := new(tokenWith[[4096 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 4864:
		x := new(tokenWith[[4864 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 5376:
		x := new(tokenWith[[5376 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 6144:
		x := new(tokenWith[[6144 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 6528:
		x := new(tokenWith[[6528 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 6784:
		x := new(tokenWith[[6784 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 6912:
		x := new(tokenWith[[6912 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	case 8192:
		x := new(tokenWith[[8192 - tokenSize - mallocHeader]byte])
		return &x.t, x.b[:n:n]
	}
	return new(Token), make([]byte, n)
}
