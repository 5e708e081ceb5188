package jose

import (
	"encoding/base64"
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
	raw         []byte
}

// JSON returns the decoded protected header.
func (h *Header) JSON() []byte { return h.raw }

// Token is a parsed compact JWS. Its strings are views into one buffer that
// is never written after parsing, so a Token may be read from many goroutines.
// Parsing does not verify: call [Key.Verify] or use a [Verifier].
type Token struct {
	Header Header
	Claims Claims

	raw       string // the compact token as given
	signedLen int    // length of the signing input: header "." payload
	payload   []byte // decoded payload
	sig       []byte // decoded signature

	headerCached bool // Header came from a Verifier's header cache
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
	t := new(Token)
	if err := parse(t, token, DefaultMaxTokenSize, true, nil); err != nil {
		return nil, err
	}
	return t, nil
}

// ParseJWS is Parse for a compact JWS whose payload is arbitrary bytes rather
// than JWT claims; its Claims are empty.
func ParseJWS(token string, maxSize int) (*Token, error) {
	t := new(Token)
	if err := parse(t, token, maxSize, false, nil); err != nil {
		return nil, err
	}
	return t, nil
}

// ParseInto is Parse into a caller-owned Token, with an explicit size limit;
// it lets a hot path reuse a Token's storage.
func ParseInto(t *Token, token string, maxSize int) error {
	*t = Token{}
	return parse(t, token, maxSize, true, nil)
}

// parse fills t, which must be zero.
func parse(t *Token, token string, maxSize int, jwt bool, hc *headerCache) error {
	if maxSize <= 0 {
		maxSize = DefaultMaxTokenSize
	}
	if len(token) > maxSize {
		return errTooLarge
	}
	d1 := strings.IndexByte(token, '.')
	if d1 < 0 {
		return errSegments
	}
	d2 := strings.IndexByte(token[d1+1:], '.')
	if d2 < 0 {
		return errSegments
	}
	d2 += d1 + 1
	if strings.IndexByte(token[d2+1:], '.') >= 0 {
		return errSegments
	}
	hs, ps, ss := token[:d1], token[d1+1:d2], token[d2+1:]
	if len(hs) == 0 {
		return errEmptySegment
	}
	cached := hc.get(hs)
	hl, pl, sl := decodedLen(len(hs)), decodedLen(len(ps)), decodedLen(len(ss))
	if hl < 0 || pl < 0 || sl < 0 {
		return errBase64
	}
	if cached != nil {
		hl = 0
	}
	// One allocation holds the decoded header, payload and signature. Escaped
	// strings are decoded into an arena after them, allocated only when some
	// string needs it (see Claims.parse).
	buf := make([]byte, hl+pl+sl)
	if cached == nil && !decodeB64(buf[:hl], hs) {
		return errBase64
	}
	if !decodeB64(buf[hl:hl+pl], ps) || !decodeB64(buf[hl+pl:], ss) {
		return errBase64
	}
	t.raw, t.signedLen = token, d2
	t.payload = buf[hl : hl+pl : hl+pl]
	t.sig = buf[hl+pl:]
	var arena []byte
	if cached != nil {
		t.Header = *cached
		t.headerCached = true
	} else if err := t.Header.parse(buf[:hl:hl], &arena); err != nil {
		return err
	}
	// The empty signature is refused after the header is read, so that an
	// unsecured JWS ("alg":"none", RFC 7515 §A.5) is reported as unsupported_alg.
	if len(ss) == 0 {
		return errEmptySegment
	}
	if jwt {
		return t.Claims.parse(t.payload, &arena)
	}
	return nil
}

func (h *Header) parse(b []byte, arena *[]byte) error {
	h.raw = b
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
	if c := s.peek(); c != '-' && (c < '0' || c > '9') {
		return NumericDate{}, errClaimType
	}
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

// bytesOf views a string's bytes without copying. The result must never be
// written: it is only handed to readers (base64 decoding, hashing).
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// stringOf views bytes as a string without copying. Only used on a Token's
// buffer, which nothing writes after parsing.
func stringOf(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
