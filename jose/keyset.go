package jose

import (
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
)

// KeyResolver finds the verification key for a token. It is given only the
// token's kid and alg: never a URL or key the token carries.
type KeyResolver interface {
	ResolveKey(kid string, alg Alg) (*Key, error)
}

var (
	errKIDMismatch = reject(ReasonUnknownKID, "no key has the token's kid")
	errAmbiguous   = reject(ReasonUnknownKID, "several keys match the token's kid and alg")
	errNoKIDMatch  = reject(ReasonUnknownKID, "token has no kid and no single key fits its alg")
)

// ResolveKey lets a single Key serve as a KeyResolver: the token's kid, if
// any, must equal the key's (when the key has one) and its alg the key's.
func (k *Key) ResolveKey(kid string, alg Alg) (*Key, error) {
	if kid != "" && k.kid != "" && kid != k.kid {
		return nil, errKIDMismatch
	}
	if alg != k.alg {
		return nil, errAlgMismatch
	}
	return k, nil
}

// KeySet is an immutable set of verification keys, looked up by (kid, alg)
// in one map read. Several keys under one kid and alg make that pair
// ambiguous, and it is refused rather than tried in turn.
type KeySet struct {
	keys    []*Key
	index   map[kidAlg]*Key // nil value: ambiguous
	skipped []SkippedKey
	serial  uint64
}

// SkipReason says why a JWK was left out of a parsed key set. The names are
// stable, for metrics labels and logs.
type SkipReason string

// The reasons a JWK is skipped.
const (
	SkipInvalidKey     SkipReason = "invalid_key"     // malformed: bad JSON or base64url, a point off its curve, inconsistent private members
	SkipWeakKey        SkipReason = "weak_key"        // RSA under 2048 or over 8192 bits, a bad exponent, the ROCA fingerprint, an HMAC secret shorter than its hash
	SkipUnsupportedKey SkipReason = "unsupported_kty" // a key type or curve jose does not verify with (X25519, secp256k1, ...)
	SkipBadUse         SkipReason = "bad_use"         // "use" other than "sig", or "key_ops" without "verify"
	SkipUnsupportedAlg SkipReason = "unsupported_alg" // a declared "alg" that is not a supported JWS algorithm
	SkipAlgMismatch    SkipReason = "alg_mismatch"    // a declared "alg" for another key type or curve
	SkipAlgNotAllowed  SkipReason = "alg_not_allowed" // the key's algorithm is not in the allow-list
	SkipAmbiguousAlg   SkipReason = "ambiguous_alg"   // no "alg", the implied one is not allowed, and several allowed ones fit
	SkipDuplicateKID   SkipReason = "duplicate_kid"   // another key has the same kid and algorithm
	SkipSecretKey      SkipReason = "secret_key"      // an oct key in a set that takes public keys only
)

// SkippedKey is a JWK that ParseKeySet or ParsePublicKeySet left out, and
// why. It names the key, never its material.
type SkippedKey struct {
	KeyID      string // the JWK's kid, empty if it had none (or not as a string)
	Thumbprint string // the RFC 7638 thumbprint; empty when the JWK did not parse, and for secret keys
	Reason     SkipReason
	Err        error // what was wrong with it: an *Error
}

// Error describes the skipped key and why it was skipped.
func (k SkippedKey) Error() string {
	s := "kid " + quote(k.KeyID)
	if k.Thumbprint != "" {
		s += " (" + k.Thumbprint + ")"
	}
	s += ": " + string(k.Reason)
	if k.Err != nil {
		s += ": " + k.Err.Error()
	}
	return s
}

// Unwrap returns Err.
func (k SkippedKey) Unwrap() error { return k.Err }

type kidAlg struct {
	kid string
	alg Alg
}

// NewKeySet builds a set from keys.
func NewKeySet(keys ...*Key) *KeySet {
	s := &KeySet{index: make(map[kidAlg]*Key, 2*len(keys)), serial: keySetSerials.Add(1)}
	for _, k := range keys {
		s.add(k)
	}
	return s
}

// keySetSerials numbers the sets NewKeySet makes, from 1.
var keySetSerials atomic.Uint64

// Serial numbers s among the key sets this process has built, from 1; a
// set declared rather than built has 0. Sets are not changed once built,
// so whoever has checked a key against the set with a given non-zero
// serial can skip the check while the set it is shown has the same serial,
// without keeping the set.
func (s *KeySet) Serial() uint64 { return s.serial }

// add puts k in the set and reports whether it did: a key with the kid
// and algorithm of one already there is left out when it is that same key
// (an identical copy, as the same key published twice or in two files),
// and otherwise makes that kid ambiguous for that algorithm (nil in the
// index), never "try each".
func (s *KeySet) add(k *Key) bool {
	if o := s.index[kidAlg{k.kid, k.alg}]; o != nil && o.thumb == k.thumb {
		return false
	}
	s.keys = append(s.keys, k)
	for _, kid := range []string{k.kid, ""} {
		ka := kidAlg{kid, k.alg}
		if _, dup := s.index[ka]; dup {
			s.index[ka] = nil
		} else {
			s.index[ka] = k
		}
		if k.kid == "" {
			break
		}
	}
	return true
}

// ResolveKey returns the one key with this kid and alg. A token without a
// kid is matched only when exactly one key in the set has its alg.
func (s *KeySet) ResolveKey(kid string, alg Alg) (*Key, error) {
	k, ok := s.index[kidAlg{kid, alg}]
	switch {
	case !ok && kid == "":
		return nil, errNoKIDMatch
	case !ok:
		return nil, errKIDMismatch
	case k == nil && kid == "":
		return nil, errNoKIDMatch
	case k == nil:
		return nil, errAmbiguous
	}
	return k, nil
}

// Keys returns the keys in the set, in the order they were added.
func (s *KeySet) Keys() []*Key { return append([]*Key(nil), s.keys...) }

// Len returns the number of keys.
func (s *KeySet) Len() int { return len(s.keys) }

// Skipped returns why each JWK that ParseKeySet or ParsePublicKeySet left
// out was unusable (the Err of each of SkippedKeys).
func (s *KeySet) Skipped() []error {
	out := make([]error, len(s.skipped))
	for i, k := range s.skipped {
		out[i] = k.Err
	}
	return out
}

// SkippedKeys returns the JWKs that ParseKeySet or ParsePublicKeySet left
// out, in document order, with why.
func (s *KeySet) SkippedKeys() []SkippedKey { return slices.Clone(s.skipped) }

// ParseKeySet parses a JWKS document ({"keys":[...]}). Each usable signing
// key is bound to its declared alg, or to every algorithm of allowed that
// fits it (see [JWK.Algs]). Keys that are unusable (weak, for encryption,
// of an unknown type) are skipped and reported by SkippedKeys, so one odd
// key at an identity provider does not take the others down. A set that
// mixes secret (oct) keys with public ones is refused: a public document
// holding a secret is a leak, and mixing invites algorithm confusion.
//
// For a JWKS fetched from an identity provider, ParsePublicKeySet binds
// each key to one algorithm only.
func ParseKeySet(data []byte, allowed ...Alg) (*KeySet, error) {
	return parseKeySet(data, allowed, false)
}

// ParsePublicKeySet parses a JWKS that an identity provider publishes, for
// verifying its tokens. Unlike ParseKeySet it binds every key to exactly
// one algorithm, so that a key never verifies a token of an algorithm its
// owner did not sign with:
//
//   - a key with "alg" is bound to it, and skipped if allowed (when not
//     empty) does not hold it;
//   - a key without "alg" is bound to the one algorithm its type and curve
//     imply: RS256 for RSA, ES256, ES384 or ES512 for P-256, P-384 or P-521,
//     EdDSA for Ed25519. When allowed does not hold that one but holds
//     exactly one other algorithm that fits the key (an RSA key with
//     allowed [PS256]), the key is bound to that; with several it is
//     skipped as ambiguous.
//
// Secret (oct) keys are skipped: a published JWKS has no business holding
// one. Keys that share a kid and algorithm are all skipped (one is kept if
// they are copies of the same key), so a token naming that kid is never
// verified with a key picked among several. Every skipped key is reported
// by SkippedKeys with its reason; the error is for a document that is not
// a JWKS at all, or mixes secret and public keys.
func ParsePublicKeySet(data []byte, allowed ...Alg) (*KeySet, error) {
	return parseKeySet(data, allowed, true)
}

func parseKeySet(data []byte, allowed []Alg, public bool) (*KeySet, error) {
	if err := strictObject(data); err != nil {
		return nil, err
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, &Error{Reason: ReasonInvalidKey, Detail: "JWKS is not valid JSON", Err: err}
	}
	if doc.Keys == nil {
		return nil, keyError(`JWKS has no "keys" array`)
	}
	s := NewKeySet()
	var bound []*Key
	var secret, pub bool
	for _, raw := range doc.Keys {
		j, err := ParseJWK(raw)
		if err != nil {
			s.skipped = append(s.skipped, skippedJWK(raw, err))
			continue
		}
		if j.kty == "oct" {
			secret = true
		} else {
			pub = true
		}
		skip := func(r SkipReason, err error) {
			sk := SkippedKey{KeyID: j.KeyID, Reason: r, Err: err}
			if j.kty != "oct" { // even the hash of a secret is left out
				sk.Thumbprint = j.thumb
			}
			s.skipped = append(s.skipped, sk)
		}
		if public && j.kty == "oct" {
			skip(SkipSecretKey, errSecretInPublicSet)
			continue
		}
		if err := j.usableFor("verify"); err != nil {
			skip(SkipBadUse, err)
			continue
		}
		algs, reason, err := j.algsFor(allowed, public)
		if err != nil {
			skip(reason, err)
			continue
		}
		for _, a := range algs {
			k, err := j.Key(a)
			if err != nil {
				skip(fitReason(err), err)
				break
			}
			bound = append(bound, k)
		}
	}
	if secret && pub {
		return nil, keyError("JWKS mixes secret and public keys")
	}
	copies := map[*Key]bool{}
	for _, k := range bound {
		if !s.add(k) {
			copies[k] = true
		}
	}
	if !public {
		return s, nil
	}
	// A published set keeps only keys a token can name: the keys whose kid
	// and algorithm another, different key shares (add made them
	// ambiguous) are left out too, and every key left out is reported.
	out := NewKeySet()
	out.skipped = s.skipped
	for _, k := range bound {
		dup := SkippedKey{KeyID: k.kid, Thumbprint: k.thumb, Reason: SkipDuplicateKID, Err: errDuplicateKey}
		switch {
		case copies[k]:
		case k.kid != "" && s.index[kidAlg{k.kid, k.alg}] == nil:
			dup.Err = errDuplicateKID
		default:
			out.add(k)
			continue
		}
		out.skipped = append(out.skipped, dup)
	}
	return out, nil
}

var (
	errSecretInPublicSet = keyError("secret (oct) key in a set of public keys")
	errDuplicateKID      = keyError("several keys have this kid and algorithm")
	errDuplicateKey      = keyError("the same key is listed again under this kid and algorithm")
)

// skippedJWK describes a JWK that did not parse: its kid when it has one,
// and whether its type or curve is one jose does not support at all, or
// its material is weak, rather than broken.
func skippedJWK(raw []byte, err error) SkippedKey {
	var head struct {
		Kid json.RawMessage `json:"kid"`
	}
	_ = json.Unmarshal(raw, &head)
	var kid string
	if json.Unmarshal(head.Kid, &kid) != nil {
		kid = ""
	}
	sk := SkippedKey{KeyID: kid, Reason: SkipInvalidKey, Err: err}
	switch {
	case isWeak(err):
		sk.Reason = SkipWeakKey
	case errors.Is(err, errUnsupportedKey):
		sk.Reason = SkipUnsupportedKey
	}
	return sk
}

// MarshalJSON encodes the public keys as a JWKS. A key bound to several
// algorithms is written once, without alg.
func (s *KeySet) MarshalJSON() ([]byte, error) {
	type seenKey struct{ kid, thumb string }
	algs := map[seenKey]uint32{} // bit a set when the key is bound to Alg a
	for _, k := range s.keys {
		algs[seenKey{k.kid, k.thumb}] |= 1 << k.alg
	}
	b := []byte(`{"keys":[`)
	done := map[seenKey]bool{}
	for _, k := range s.keys {
		sk := seenKey{k.kid, k.thumb}
		if done[sk] {
			continue
		}
		done[sk] = true
		kb, err := k.MarshalJSON()
		if err != nil {
			return nil, err
		}
		if a := algs[sk]; a&(a-1) != 0 {
			kb = dropAlg(kb)
		}
		if len(done) > 1 {
			b = append(b, ',')
		}
		b = append(b, kb...)
	}
	return append(b, "]}"...), nil
}

// dropAlg removes the leading "alg" member that Key.MarshalJSON writes.
func dropAlg(kb []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(kb, &m) != nil {
		return kb
	}
	delete(m, "alg")
	out, err := json.Marshal(m)
	if err != nil {
		return kb
	}
	return out
}
