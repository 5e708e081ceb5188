// Package mint builds JWT claim sets the way keygate issues them — iat, nbf
// and exp from one reading of the caller's clock, and a random 128-bit jti —
// and signs them with a jose.Signer. The clock and random source are the
// caller's, so tests can pin both.
package mint

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/keygate/keygate/jose"
)

// Claims is what a caller chooses about a token; the times and jti are
// always set by Payload.
type Claims struct {
	Issuer   string
	Subject  string
	Audience []string // one value is written as a string, more as an array
	Scope    string   // space-separated
	TTL      time.Duration
	// Extra holds further claims as JSON values. It may not name a claim
	// that Claims sets itself (see Reserved).
	Extra map[string]json.RawMessage
}

// Reserved lists the claims Payload writes from Claims' own fields.
var Reserved = []string{"iss", "sub", "aud", "scope", "iat", "nbf", "exp", "jti"}

var (
	// ErrReservedClaim is returned for an Extra claim that Claims sets itself.
	ErrReservedClaim = errors.New("claim is reserved: keygate sets it")
	// ErrTTL is returned for a TTL that is not positive.
	ErrTTL = errors.New("ttl must be positive")
)

// Sign builds the payload at time now and signs it with s.
func Sign(s *jose.Signer, c Claims, now time.Time, random io.Reader) (string, error) {
	payload, err := Payload(c, now, random)
	if err != nil {
		return "", err
	}
	return s.Sign(payload)
}

// Payload encodes the claims as a JSON object, with iat and nbf at now and
// exp at now+TTL, in whole seconds.
func Payload(c Claims, now time.Time, random io.Reader) ([]byte, error) {
	if c.TTL <= 0 {
		return nil, ErrTTL
	}
	m, err := c.extra()
	if err != nil {
		return nil, err
	}
	jti, err := NewID(random)
	if err != nil {
		return nil, err
	}
	setString(m, "iss", c.Issuer)
	setString(m, "sub", c.Subject)
	setString(m, "scope", c.Scope)
	if aud := c.audience(); aud != nil {
		m["aud"] = aud
	}
	m["iat"], m["nbf"] = now.Unix(), now.Unix()
	m["exp"] = now.Add(c.TTL).Unix()
	m["jti"] = jti
	return json.Marshal(m)
}

func (c Claims) extra() (map[string]any, error) {
	m := make(map[string]any, len(c.Extra)+len(Reserved))
	for name, v := range c.Extra {
		if slices.Contains(Reserved, name) {
			return nil, fmt.Errorf("%q: %w", name, ErrReservedClaim)
		}
		m[name] = v
	}
	return m, nil
}

func (c Claims) audience() any {
	switch len(c.Audience) {
	case 0:
		return nil
	case 1:
		return c.Audience[0]
	}
	return c.Audience
}

func setString(m map[string]any, name, v string) {
	if v != "" {
		m[name] = v
	}
}

// NewID returns 128 random bits from random, base64url-encoded: a jti.
func NewID(random io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return "", fmt.Errorf("read random jti: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
