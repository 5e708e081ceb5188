package jose

import "encoding/json"

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
	skipped []error
}

type kidAlg struct {
	kid string
	alg Alg
}

// NewKeySet builds a set from keys.
func NewKeySet(keys ...*Key) *KeySet {
	s := &KeySet{index: make(map[kidAlg]*Key, 2*len(keys))}
	for _, k := range keys {
		s.add(k)
	}
	return s
}

func (s *KeySet) add(k *Key) {
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

// Skipped returns why each JWK that ParseKeySet left out was unusable.
func (s *KeySet) Skipped() []error { return s.skipped }

// ParseKeySet parses a JWKS document ({"keys":[...]}). Each usable signing
// key is bound to its declared alg, or to every algorithm of allowed that
// fits it (see [JWK.Algs]). Keys that are unusable (weak, for encryption,
// of an unknown type) are skipped and reported by Skipped, so one odd key at
// an identity provider does not take the others down. A set that mixes
// secret (oct) keys with public ones is refused: a public document holding a
// secret is a leak, and mixing invites algorithm confusion.
func ParseKeySet(data []byte, allowed ...Alg) (*KeySet, error) {
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
	var secret, public bool
	for _, raw := range doc.Keys {
		j, err := ParseJWK(raw)
		if err != nil {
			s.skipped = append(s.skipped, err)
			continue
		}
		if j.kty == "oct" {
			secret = true
		} else {
			public = true
		}
		if err := s.addJWK(j, allowed); err != nil {
			s.skipped = append(s.skipped, err)
		}
	}
	if secret && public {
		return nil, keyError("JWKS mixes secret and public keys")
	}
	return s, nil
}

func (s *KeySet) addJWK(j *JWK, allowed []Alg) error {
	if err := j.usableFor("verify"); err != nil {
		return err
	}
	algs, err := j.Algs(allowed)
	if err != nil {
		return err
	}
	for _, a := range algs {
		k, err := j.Key(a)
		if err != nil {
			return err
		}
		s.add(k)
	}
	return nil
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
