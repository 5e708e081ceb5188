package jose

import "time"

// Verifier checks compact JWTs: size, structure, an explicit algorithm
// allow-list, the signature with a key found by kid and alg, then the
// claims. It is immutable and safe for concurrent use.
type Verifier struct {
	keys    KeyResolver
	algs    uint32 // bit a set when Alg a is allowed
	exp     Expected
	maxSize int
	now     func() time.Time
}

// Option configures a Verifier.
type Option func(*Verifier)

// WithMaxTokenSize sets the size limit checked before any decoding
// (default DefaultMaxTokenSize).
func WithMaxTokenSize(n int) Option { return func(v *Verifier) { v.maxSize = n } }

// WithClock sets the clock claims are checked against (default time.Now).
func WithClock(now func() time.Time) Option { return func(v *Verifier) { v.now = now } }

var errNoAlgs = keyError("a verifier needs at least one allowed algorithm")

// NewVerifier returns a Verifier that accepts only algs, resolves keys with
// keys, and demands exp of the claims.
func NewVerifier(keys KeyResolver, algs []Alg, exp Expected, opts ...Option) (*Verifier, error) {
	v := &Verifier{keys: keys, exp: exp, maxSize: DefaultMaxTokenSize, now: time.Now}
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
	t := new(Token)
	if err := v.VerifyInto(t, token); err != nil {
		return nil, err
	}
	return t, nil
}

// VerifyInto is Verify into a caller-owned Token. On error t holds no
// trustworthy data.
func (v *Verifier) VerifyInto(t *Token, token string) error {
	if err := parse(t, token, v.maxSize, true); err != nil {
		return err
	}
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
	return v.Check(t)
}

// Check validates the header type and claims of a token whose signature has
// been verified.
func (v *Verifier) Check(t *Token) error {
	if v.exp.Type != "" && !typeMatches(t.Header.Type, v.exp.Type) {
		return errType
	}
	return t.Claims.Validate(&v.exp, v.now())
}
