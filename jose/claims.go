package jose

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// Claims are a JWT's claims (RFC 7519 §4). The registered claims are decoded
// into fields during the one parse; every member, registered or not, is
// reachable as raw JSON through [Claims.Raw] without parsing again.
type Claims struct {
	Issuer    string   // "iss"
	Subject   string   // "sub"
	ID        string   // "jti"
	Audience  []string // "aud", a string or an array in the token
	Expiry    NumericDate
	NotBefore NumericDate
	IssuedAt  NumericDate
	// Scope is the space-separated scope list from "scope" (RFC 8693,
	// RFC 9068) and "scp" (a string or an array, as Okta and Entra ID send).
	Scope string

	payload  []byte
	members  []member
	escNames *[]string // names that had escapes, decoded; nil if none had
	// present has a bit (hasIss, ...) for each registered claim the token
	// holds, so that Has and Validate answer for those without a search;
	// only parse sets it, as it fills members.
	present uint16
	audBuf  [2]string
	memBuf  [16]member
}

// member is one top-level claim: where its name lies in the payload, between
// nameStart and the closing quote at nameEnd. Offsets rather than strings
// keep the Claims mostly free of pointers, which the garbage collector would
// have to trace, and two of them keep it small. A name written with escapes
// is decoded into escNames, and nameStart is then -1-index. The value, which
// follows the name's colon, is found again when it is asked for (Raw): the
// parse checked it, so stepping over it cannot fail.
type member struct {
	nameStart, nameEnd int32
}

func (c *Claims) memberName(m member) string {
	if m.nameStart < 0 {
		return (*c.escNames)[-1-m.nameStart]
	}
	return stringOf(c.payload[m.nameStart:m.nameEnd])
}

// JSON returns the whole decoded payload.
func (c *Claims) JSON() []byte { return c.payload }

// Raw returns the raw JSON value of the named top-level claim.
func (c *Claims) Raw(name string) ([]byte, bool) {
	i := c.index(name)
	if i < 0 {
		return nil, false
	}
	s := scanner{b: c.payload, i: int(c.members[i].nameEnd) + 1}
	s.expect(':')
	s.ws()
	start := s.i
	if s.skip(1) != nil { // cannot fail: the parse checked this value
		return nil, false
	}
	return c.payload[start:s.i:s.i], true
}

// index returns the position of the named claim in c.members, or -1.
func (c *Claims) index(name string) int {
	for i, m := range c.members {
		if c.memberName(m) == name {
			return i
		}
	}
	return -1
}

// StringClaim returns the value of the named top-level claim when it is a
// JSON string: a view into the token, without a copy, unless the string
// has escapes (then decoded into a new string). ok is false when the claim
// is missing or not a string.
func (c *Claims) StringClaim(name string) (string, bool) {
	raw, ok := c.Raw(name)
	if !ok || len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return stringOf(raw[1 : len(raw)-1]), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil { // cannot fail: the scanner checked the string
		return "", false
	}
	return s, true
}

// Has reports whether the named claim is present.
func (c *Claims) Has(name string) bool {
	if bit := registeredBit(name); bit != 0 {
		return c.present&bit != 0
	}
	return c.index(name) >= 0
}

// The bits of Claims.present.
const (
	hasIss = 1 << iota
	hasSub
	hasAud
	hasExp
	hasNbf
	hasIat
	hasJti
)

// registeredBit is the bit of Claims.present for name, or 0 for a claim
// that has none.
func registeredBit(name string) uint16 {
	switch name {
	case "iss":
		return hasIss
	case "sub":
		return hasSub
	case "aud":
		return hasAud
	case "exp":
		return hasExp
	case "nbf":
		return hasNbf
	case "iat":
		return hasIat
	case "jti":
		return hasJti
	}
	return 0
}

// Names returns the top-level claim names in token order.
func (c *Claims) Names() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = c.memberName(m)
	}
	return out
}

// Decode unmarshals the payload into v with encoding/json, for callers that
// want their own claim types; it is a second parse, off the fast path.
func (c *Claims) Decode(v any) error { return json.Unmarshal(c.payload, v) }

// HasScope reports whether scope is one of the space-separated scopes.
func (c *Claims) HasScope(scope string) bool {
	if scope == "" {
		return false
	}
	s := c.Scope
	for len(s) > 0 {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			return s == scope
		}
		if s[:i] == scope {
			return true
		}
		s = s[i+1:]
	}
	return false
}

func (c *Claims) parse(b []byte, arena *[]byte) error {
	c.payload = b
	c.members = c.memBuf[:0]
	s := scanner{b: b}
	// filter has a bit set for each (length, first, last byte) class of the
	// names seen, to make duplicate detection cheap.
	var filter uint64
	if !s.expect('{') {
		return errJSONNotObject
	}
	if !s.expect('}') {
		for {
			name, m, err := c.name(&s, arena)
			if err != nil {
				return err
			}
			if len(c.members) == maxMembers {
				return errJSONMembers
			}
			// The filter test is inline; only a hit compares names.
			bit := nameBit(name)
			if filter&bit != 0 && c.seen(name) {
				return errJSONDuplicate
			}
			filter |= bit
			s.ws()
			if err := c.member(&s, name, arena); err != nil {
				return err
			}
			c.members = append(c.members, m)
			if s.i < len(b) && b[s.i] == ',' { // compact JSON: the usual case
				s.i++
				continue
			}
			if s.expect('}') {
				break
			}
			if !s.expect(',') {
				return errJSONSyntax
			}
		}
	}
	return s.end()
}

// name reads a member name and the colon after it, and records where the
// name lies.
func (c *Claims) name(s *scanner, arena *[]byte) ([]byte, member, error) {
	if s.i < len(s.b) && s.b[s.i] == '"' {
		if raw, ok := s.plainStr(); ok && s.i < len(s.b) && s.b[s.i] == ':' {
			s.i++
			return raw, member{nameStart: int32(s.i - 2 - len(raw)), nameEnd: int32(s.i - 2)}, nil
		} else if ok {
			s.i -= 2 + len(raw) // white space before the colon: read it all again below
		}
	}
	raw, esc, err := s.str()
	if err != nil {
		return nil, member{}, err
	}
	m := member{nameStart: int32(s.i - 1 - len(raw)), nameEnd: int32(s.i - 1)}
	if esc {
		raw = appendArena(arena, raw)
		if c.escNames == nil {
			c.escNames = new([]string)
		}
		*c.escNames = append(*c.escNames, stringOf(raw))
		m.nameStart = int32(-len(*c.escNames))
	}
	if !s.expect(':') {
		return nil, member{}, errJSONSyntax
	}
	return raw, m, nil
}

// nameBit is a name's bit in the 64-bit filter over (length, first byte,
// last byte) that rules out almost every duplicate at once.
func nameBit(name []byte) uint64 {
	var bit uint64 = 1
	if len(name) > 0 {
		bit <<= (uint(len(name))*31 + uint(name[0])*7 + uint(name[len(name)-1])) & 63
	}
	return bit
}

// seen reports whether a member named name was read already.
func (c *Claims) seen(name []byte) bool {
	for _, m := range c.members {
		if m.nameStart >= 0 && int(m.nameEnd-m.nameStart) != len(name) {
			continue
		}
		if c.memberName(m) == string(name) {
			return true
		}
	}
	return false
}

func (c *Claims) member(s *scanner, name []byte, arena *[]byte) error {
	var err error
	switch string(name) {
	case "iss":
		c.present |= hasIss
		c.Issuer, err = claimString(s, arena)
	case "sub":
		c.present |= hasSub
		c.Subject, err = claimString(s, arena)
	case "jti":
		c.present |= hasJti
		c.ID, err = claimString(s, arena)
	case "aud":
		c.present |= hasAud
		c.Audience, err = c.audience(s, arena)
	case "exp":
		c.present |= hasExp
		c.Expiry, err = parseNumericDate(s)
	case "nbf":
		c.present |= hasNbf
		c.NotBefore, err = parseNumericDate(s)
	case "iat":
		c.present |= hasIat
		c.IssuedAt, err = parseNumericDate(s)
	case "scope":
		var v string
		if v, err = claimString(s, arena); err == nil {
			c.Scope = joinScope(arena, c.Scope, v)
		}
	case "scp":
		err = c.scp(s, arena)
	default:
		err = s.skip(1)
	}
	return err
}

func claimString(s *scanner, arena *[]byte) (string, error) {
	if s.peek() != '"' {
		return "", errClaimType
	}
	if v, ok := s.plainStr(); ok {
		return stringOf(v), nil
	}
	v, err := s.stringValue(arena)
	return stringOf(v), err
}

// audience reads "aud": one string, or an array of strings (RFC 7519 §4.1.3).
// Up to two audiences live inside the Claims; more take one allocation.
func (c *Claims) audience(s *scanner, arena *[]byte) ([]string, error) {
	if s.peek() == '"' {
		v, err := claimString(s, arena)
		c.audBuf[0] = v
		return c.audBuf[:1:1], err
	}
	out := c.audBuf[:0]
	err := stringArray(s, arena, func(v string) { out = append(out, v) })
	return out, err
}

// scp is a string or an array of strings; either way it joins Scope.
func (c *Claims) scp(s *scanner, arena *[]byte) error {
	if s.peek() == '"' {
		v, err := claimString(s, arena)
		c.Scope = joinScope(arena, c.Scope, v)
		return err
	}
	return stringArray(s, arena, func(v string) { c.Scope = joinScope(arena, c.Scope, v) })
}

// joinScope appends v to a space-separated list kept in the arena.
func joinScope(arena *[]byte, list, v string) string {
	if list == "" {
		return v
	}
	if v == "" {
		return list
	}
	start := len(*arena)
	*arena = append(*arena, list...)
	*arena = append(*arena, ' ')
	*arena = append(*arena, v...)
	return stringOf((*arena)[start:])
}

func stringArray(s *scanner, arena *[]byte, each func(string)) error {
	if !s.expect('[') {
		return errClaimType
	}
	if s.expect(']') {
		return nil
	}
	for {
		v, err := claimString(s, arena)
		if err != nil {
			return err
		}
		each(v)
		if s.expect(']') {
			return nil
		}
		if !s.expect(',') {
			return errJSONSyntax
		}
	}
}

// Expected is what a verifier demands of a token's claims and header beyond
// its signature. The zero value checks only exp, nbf and iat when present.
type Expected struct {
	Issuer string // if set, "iss" must equal it
	// Audience, if set, must share one value with "aud" (any-of), or every
	// value of it must appear in "aud" when AllAudiences is set.
	Audience     []string
	AllAudiences bool
	// Type, if set, must match the "typ" header, ignoring case and an
	// "application/" prefix (RFC 7515 §4.1.9), e.g. "at+jwt".
	Type string
	// Require names claims that must be present, e.g. "exp", "sub".
	Require []string
	Leeway  time.Duration // tolerance for clock skew on exp, nbf, iat
}

var (
	errExpired     = reject(ReasonExpired, "token has expired")
	errNotYet      = reject(ReasonNotYetValid, "token is not valid yet")
	errIssuedLater = reject(ReasonNotYetValid, "token was issued in the future")
	errIssuer      = reject(ReasonWrongIssuer, "issuer is not accepted")
	errAudience    = reject(ReasonWrongAudience, "audience is not accepted")
	errType        = reject(ReasonMalformed, "typ header is not the expected type")
	errNoIssuer    = reject(ReasonMissingClaim, "iss is missing")
	errNoAudience  = reject(ReasonMissingClaim, "aud is missing")
)

// Validate checks the claims against e at time now. It runs after the
// signature has been verified; on its own it proves nothing.
func (c *Claims) Validate(e *Expected, now time.Time) error {
	for _, name := range e.Require {
		if !c.Has(name) {
			return missingClaim(name)
		}
	}
	t := now.Unix()
	leeway := int64((e.Leeway + time.Second - 1) / time.Second)
	if c.Expiry.Valid && t-leeway >= c.Expiry.Unix {
		return errExpired
	}
	if c.NotBefore.Valid && t+leeway < c.NotBefore.Unix {
		return errNotYet
	}
	if c.IssuedAt.Valid && t+leeway < c.IssuedAt.Unix {
		return errIssuedLater
	}
	if e.Issuer != "" {
		if c.present&hasIss == 0 {
			return errNoIssuer
		}
		if c.Issuer != e.Issuer {
			return errIssuer
		}
	}
	if len(e.Audience) > 0 {
		if len(c.Audience) == 0 {
			return errNoAudience
		}
		if !audienceOK(c.Audience, e.Audience, e.AllAudiences) {
			return errAudience
		}
	}
	return nil
}

func audienceOK(have, want []string, all bool) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if found && !all {
			return true
		}
		if !found && all {
			return false
		}
	}
	return all
}

// missingClaim names the claim; the common ones are static so that the
// rejection allocates nothing.
func missingClaim(name string) error {
	switch name {
	case "exp":
		return errMissingExp
	case "sub":
		return errMissingSub
	case "iat":
		return errMissingIat
	case "jti":
		return errMissingJti
	}
	return reject(ReasonMissingClaim, name+" is missing")
}

var (
	errMissingExp = reject(ReasonMissingClaim, "exp is missing")
	errMissingSub = reject(ReasonMissingClaim, "sub is missing")
	errMissingIat = reject(ReasonMissingClaim, "iat is missing")
	errMissingJti = reject(ReasonMissingClaim, "jti is missing")
)

// TypeMatches compares a "typ" header with an expected media type, ignoring
// case and an "application/" prefix (RFC 7515 §4.1.9).
func TypeMatches(have, want string) bool {
	const prefix = "application/"
	if len(have) > len(prefix) && strings.EqualFold(have[:len(prefix)], prefix) {
		have = have[len(prefix):]
	}
	if len(want) > len(prefix) && strings.EqualFold(want[:len(prefix)], prefix) {
		want = want[len(prefix):]
	}
	return strings.EqualFold(have, want)
}
