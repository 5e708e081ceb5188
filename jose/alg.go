package jose

import "crypto"

// Alg is a JWS algorithm ("alg" header value, RFC 7518 §3.1 and RFC 8037).
type Alg uint8

// The supported algorithms. The zero Alg is invalid; "none" is never supported.
const (
	HS256 Alg = iota + 1
	HS384
	HS512
	RS256
	RS384
	RS512
	PS256
	PS384
	PS512
	ES256
	ES384
	ES512
	EdDSA
	algCount
)

var algNames = [algCount]string{
	HS256: "HS256", HS384: "HS384", HS512: "HS512",
	RS256: "RS256", RS384: "RS384", RS512: "RS512",
	PS256: "PS256", PS384: "PS384", PS512: "PS512",
	ES256: "ES256", ES384: "ES384", ES512: "ES512",
	EdDSA: "EdDSA",
}

// Algorithms lists every supported algorithm.
func Algorithms() []Alg {
	out := make([]Alg, 0, algCount-1)
	for a := HS256; a < algCount; a++ {
		out = append(out, a)
	}
	return out
}

func (a Alg) String() string {
	if a > 0 && a < algCount {
		return algNames[a]
	}
	return "invalid"
}

// ParseAlg maps an "alg" name to an Alg. Names are case-sensitive (RFC 7515
// §4.1.1), so "none", "None" and "hs256" are all refused.
func ParseAlg(name string) (Alg, error) {
	if a := lookupAlg(name); a != 0 {
		return a, nil
	}
	return 0, errUnsupportedAlg
}

func lookupAlg(name string) Alg {
	if len(name) != 5 {
		return 0
	}
	for a := HS256; a < algCount; a++ {
		if algNames[a] == name {
			return a
		}
	}
	return 0
}

// family groups algorithms by the key type they need.
type family uint8

const (
	famHMAC family = iota + 1
	famRSA
	famPSS
	famEC
	famEd
)

func (a Alg) family() family {
	switch a {
	case HS256, HS384, HS512:
		return famHMAC
	case RS256, RS384, RS512:
		return famRSA
	case PS256, PS384, PS512:
		return famPSS
	case ES256, ES384, ES512:
		return famEC
	case EdDSA:
		return famEd
	}
	return 0
}

// hash is the digest an algorithm signs (0 for EdDSA, which hashes internally).
func (a Alg) hash() crypto.Hash {
	switch a {
	case HS256, RS256, PS256, ES256:
		return crypto.SHA256
	case HS384, RS384, PS384, ES384:
		return crypto.SHA384
	case HS512, RS512, PS512, ES512:
		return crypto.SHA512
	}
	return 0
}

// MarshalText and UnmarshalText let an Alg appear in JSON and YAML as its name.
func (a Alg) MarshalText() ([]byte, error) {
	if a.family() == 0 {
		return nil, errUnsupportedAlg
	}
	return []byte(a.String()), nil
}

func (a *Alg) UnmarshalText(b []byte) error {
	v, err := ParseAlg(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}
