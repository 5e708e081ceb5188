package jose

import (
	"strings"
	"sync/atomic"
	"time"
)

// Verifier checks compact JWTs: size, structure, an explicit algorithm
// allow-list, the signature with a key found by kid and alg, then the
// claims. It is immutable and safe for concurrent use.
type Verifier struct {
	keys   KeyResolver
	algs   uint32 // bit a set when Alg a is allowed
	exp    Expected
	now    func() time.Time
	parser Parser
}

// Option configures a Verifier.
type Option func(*Verifier)

// WithMaxTokenSize sets the size limit checked before any decoding
// (default DefaultMaxTokenSize).
func WithMaxTokenSize(n int) Option { return func(v *Verifier) { v.parser.maxSize = n } }

// WithClock sets the clock claims are checked against (default time.Now).
func WithClock(now func() time.Time) Option { return func(v *Verifier) { v.now = now } }

var errNoAlgs = keyError("a verifier needs at least one allowed algorithm")

// NewVerifier returns a Verifier that accepts only algs, resolves keys with
// keys, and demands exp of the claims.
func NewVerifier(keys KeyResolver, algs []Alg, exp Expected, opts ...Option) (*Verifier, error) {
	v := &Verifier{keys: keys, exp: exp, parser: Parser{maxSize: DefaultMaxTokenSize}, now: time.Now}
	for _, a := range algs {
		if a.family() == 0 {
			return nil, errNoKeyAlg
		}
		v.algs |= 1 << a
	}
	if v.algs == 0 {
		return nil, errNoAlgs
	}
	for _, o := range opts {
		o(v)
	}
	return v, nil
}

var errAlgNotAllowed = reject(ReasonUnsupportedAlg, "alg is not allowed")

// Verify parses and fully verifies token, returning its claims.
func (v *Verifier) Verify(token string) (*Token, error) {
	t, err := v.parser.parse(nil, token)
	if err != nil {
		return nil, err
	}
	if err := v.verify(t); err != nil {
		return nil, err
	}
	return t, nil
}

// VerifyInto is Verify into a caller-owned Token. On error t holds no
// trustworthy data.
func (v *Verifier) VerifyInto(t *Token, token string) error {
	*t = Token{}
	if _, err := v.parser.parse(t, token); err != nil {
		return err
	}
	return v.verify(t)
}

// verify checks the parsed token t.
func (v *Verifier) verify(t *Token) error {
	if v.algs&(1<<t.Header.Alg) == 0 {
		return errAlgNotAllowed
	}
	k, err := v.keys.ResolveKey(t.Header.KeyID, t.Header.Alg)
	if err != nil {
		return err
	}
	if err := k.Verify(t); err != nil {
		return err
	}
	v.parser.Verified(t)
	return v.Check(t)
}

// Check validates the header type and claims of a token whose signature has
// been verified.
func (v *Verifier) Check(t *Token) error {
	if v.exp.Type != "" && !TypeMatches(t.Header.Type, v.exp.Type) {
		return errType
	}
	return t.Claims.Validate(&v.exp, v.now())
}

// Parser parses compact JWTs under a size limit, like ParseInto, and keeps a
// small cache of the protected headers of tokens whose signature verified:
// an issuer signs all its tokens under a few fixed headers, so later tokens
// skip decoding and parsing theirs. It is safe for concurrent use.
type Parser struct {
	maxSize int
	headers headerCache
}

// NewParser returns a Parser with the given size limit (0 means
// DefaultMaxTokenSize).
func NewParser(maxSize int) *Parser { return &Parser{maxSize: maxSize} }

// Parse parses token into a new Token, as the package-level Parse does but
// under the parser's size limit and with its header cache; the Token and its
// buffer are one allocation when that takes no more memory than two.
func (p *Parser) Parse(token string) (*Token, error) { return p.parse(nil, token) }

// ParseInto parses token into t, as the package-level ParseInto does.
func (p *Parser) ParseInto(t *Token, token string) error {
	*t = Token{}
	_, err := p.parse(t, token)
	return err
}

func (p *Parser) parse(t *Token, token string) (*Token, error) {
	return parse(t, token, p.maxSize, true, &p.headers)
}

// Verified tells the parser that t's signature verified, so that its header
// may be remembered. Never call it for a token that has not verified: only
// then can a cached header not be an attacker's choice.
func (p *Parser) Verified(t *Token) {
	if !t.headerCached {
		p.headers.put(t.raw[:strings.IndexByte(t.raw, '.')], &t.Header)
	}
}

// headerCache remembers the protected headers of recently verified tokens.
// An issuer signs all its tokens under a few fixed headers, so a hit skips
// decoding and parsing one. Only headers of tokens whose signature verified
// are stored, so forged tokens cannot churn it; a header is a pure function
// of its encoded bytes, so a hit is exactly what parsing would give.
type headerCache struct {
	slots [4]atomic.Pointer[cachedHeader]
	next  atomic.Uint32
}

type cachedHeader struct {
	seg string
	h   Header
}

func (c *headerCache) get(seg string) *Header {
	if c == nil {
		return nil
	}
	for i := range c.slots {
		if e := c.slots[i].Load(); e != nil && e.seg == seg {
			return &e.h
		}
	}
	return nil
}

// put stores a copy of h that shares no memory with the token it came from.
func (c *headerCache) put(seg string, h *Header) {
	e := &cachedHeader{seg: strings.Clone(seg), h: Header{Alg: h.Alg, raw: strings.Clone(h.raw),
		KeyID: strings.Clone(h.KeyID), Type: strings.Clone(h.Type), ContentType: strings.Clone(h.ContentType)}}
	c.slots[c.next.Add(1)%uint32(len(c.slots))].Store(e)
}
