package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha512"
	"encoding/json"
	"io"
)

// Signer signs tokens with one private key (or HMAC secret) under one
// algorithm. The protected header is encoded once, at construction.
type Signer struct {
	_      [0]func()
	alg    Alg
	kid    string
	typ    string
	priv   crypto.Signer // nil for HMAC
	mac    *macKey
	key    *Key // the matching verification key
	rand   io.Reader
	prefix []byte // base64url(header) + "."
}

// NewSigner binds a private key to alg. priv is a []byte secret for HS*, or
// a crypto.Signer (*rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey, or
// a key held elsewhere, such as an HSM) whose public half fits alg. The
// header carries kid and "typ":"JWT".
func NewSigner(alg Alg, kid string, priv any) (*Signer, error) {
	s := &Signer{alg: alg, kid: kid, typ: "JWT", rand: rand.Reader}
	switch p := priv.(type) {
	case []byte:
		k, err := NewHMACKey(alg, kid, p)
		if err != nil {
			return nil, err
		}
		s.key, s.mac = k, k.mac
	case crypto.Signer:
		if alg.family() == famHMAC {
			return nil, errKeyAlg
		}
		if rk, ok := p.(*rsa.PrivateKey); ok {
			if err := rk.Validate(); err != nil {
				return nil, &Error{Reason: ReasonInvalidKey, Detail: "RSA private key is invalid", Err: err}
			}
		}
		k, err := NewKey(alg, kid, p.Public())
		if err != nil {
			return nil, err
		}
		s.key, s.priv = k, p
	default:
		return nil, keyError("unsupported private key type")
	}
	s.encodeHeader()
	return s, nil
}

// WithType returns a copy of s whose header carries typ instead of "JWT"
// (for example "at+jwt", RFC 9068); an empty typ omits the member.
func (s *Signer) WithType(typ string) *Signer {
	c := &Signer{alg: s.alg, kid: s.kid, typ: typ, priv: s.priv, mac: s.mac, key: s.key, rand: s.rand}
	c.encodeHeader()
	return c
}

func (s *Signer) encodeHeader() {
	ms := []jsonMember{{"alg", s.alg.String()}}
	if s.kid != "" {
		ms = append(ms, jsonMember{"kid", s.kid})
	}
	if s.typ != "" {
		ms = append(ms, jsonMember{"typ", s.typ})
	}
	h := append(appendMembers([]byte{'{'}, ms), '}')
	s.prefix = append(b64.AppendEncode(nil, h), '.')
}

// Alg returns the signing algorithm.
func (s *Signer) Alg() Alg { return s.alg }

// KeyID returns the kid written into every header.
func (s *Signer) KeyID() string { return s.kid }

// Key returns the verification key matching this signer.
func (s *Signer) Key() *Key { return s.key }

// SignClaims encodes claims with encoding/json and signs them. The encoding
// must be a JSON object.
func (s *Signer) SignClaims(claims any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	if len(payload) == 0 || payload[0] != '{' {
		return "", errJSONNotObject
	}
	return s.Sign(payload)
}

// Sign signs payload as it is and returns the compact serialization.
func (s *Signer) Sign(payload []byte) (string, error) {
	n := len(s.prefix) + b64.EncodedLen(len(payload)) + 1 + b64.EncodedLen(512)
	buf := make([]byte, 0, n)
	buf = append(buf, s.prefix...)
	buf = b64.AppendEncode(buf, payload)
	sig, err := s.sign(buf)
	if err != nil {
		return "", err
	}
	buf = append(buf, '.')
	buf = b64.AppendEncode(buf, sig)
	return stringOf(buf), nil // buf is not touched again
}

func (s *Signer) sign(msg []byte) ([]byte, error) {
	if s.mac != nil {
		return s.mac.sign(msg), nil
	}
	if s.alg == EdDSA {
		return s.priv.Sign(nil, msg, crypto.Hash(0))
	}
	var d [sha512.Size]byte
	digest := sum(s.alg.hash(), msg, &d)
	switch s.alg.family() {
	case famRSA:
		return s.priv.Sign(s.rand, digest, s.alg.hash())
	case famPSS:
		return s.priv.Sign(s.rand, digest, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: s.alg.hash()})
	}
	var der []byte
	var err error
	if k, ok := s.priv.(*ecdsa.PrivateKey); ok {
		der, err = ecdsa.SignASN1(s.rand, k, digest)
	} else {
		der, err = s.priv.Sign(s.rand, digest, s.alg.hash())
	}
	if err != nil {
		return nil, err
	}
	return derToP1363(der, (curveOf(s.alg).Params().BitSize+7)/8)
}

var errDERSig = keyError("signer returned a malformed ECDSA signature")

// derToP1363 turns an ASN.1 ECDSA signature into fixed-width r‖s.
func derToP1363(der []byte, size int) ([]byte, error) {
	body, ok := derTLV(der, 0x30)
	if !ok {
		return nil, errDERSig
	}
	out := make([]byte, 2*size)
	for i := range 2 {
		v, rest, ok := derNext(body, 0x02)
		if !ok {
			return nil, errDERSig
		}
		v = trimInt(v)
		if len(v) > size {
			return nil, errDERSig
		}
		copy(out[(i+1)*size-len(v):(i+1)*size], v)
		body = rest
	}
	if len(body) != 0 {
		return nil, errDERSig
	}
	return out, nil
}

// derTLV reads one element of the given tag that must fill b exactly.
func derTLV(b []byte, tag byte) ([]byte, bool) {
	v, rest, ok := derNext(b, tag)
	return v, ok && len(rest) == 0
}

func derNext(b []byte, tag byte) (v, rest []byte, ok bool) {
	if len(b) < 2 || b[0] != tag {
		return nil, nil, false
	}
	n, hdr := int(b[1]), 2
	if n == 0x81 {
		if len(b) < 3 {
			return nil, nil, false
		}
		n, hdr = int(b[2]), 3
	} else if n > 0x80 {
		return nil, nil, false
	}
	if len(b) < hdr+n {
		return nil, nil, false
	}
	return b[hdr : hdr+n], b[hdr+n:], true
}

var _ crypto.Signer = ed25519.PrivateKey(nil)
