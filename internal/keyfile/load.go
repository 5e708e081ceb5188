package keyfile

import (
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/keygate/keygate/jose"
)

// LoadSigner reads a private key (PEM or private JWK) from path and binds it
// to alg, or with alg 0 to the algorithm the key implies. The header's kid
// is kid if set, else the JWK's kid, else the key's RFC 7638 thumbprint.
func LoadSigner(path string, alg jose.Alg, kid string) (*jose.Signer, error) {
	data, err := Read(path)
	if err != nil {
		return nil, err
	}
	s, err := parseSigner(data, alg, kid)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// parseSigner is LoadSigner on a file's contents.
func parseSigner(data []byte, alg jose.Alg, kid string) (*jose.Signer, error) {
	if err := checkKeyID(kid); err != nil {
		return nil, err
	}
	switch sniff(data) {
	case formatJWK:
		return jwkSigner(data, alg, kid)
	case formatJWKS:
		return nil, errors.New("is a JWKS; signing needs a single private key")
	default:
		return pemSigner(data, alg, kid)
	}
}

// LoadSecretSigner reads a raw HMAC secret from path and binds it to alg
// (HS256 when 0) under kid, which may be empty.
func LoadSecretSigner(path string, alg jose.Alg, kid string) (*jose.Signer, error) {
	secret, err := Read(path)
	if err != nil {
		return nil, err
	}
	if alg == 0 {
		alg = jose.HS256
	}
	s, err := jose.NewSigner(alg, kid, secret)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func pemSigner(data []byte, alg jose.Alg, kid string) (*jose.Signer, error) {
	priv, err := jose.ParsePrivatePEM(data)
	if err != nil {
		return nil, err
	}
	if alg == 0 {
		if alg, err = DefaultAlg(priv.Public()); err != nil {
			return nil, err
		}
	}
	if kid == "" {
		if kid, err = thumbprint(alg, priv.Public()); err != nil {
			return nil, err
		}
	}
	return jose.NewSigner(alg, kid, priv)
}

func jwkSigner(data []byte, alg jose.Alg, kid string) (*jose.Signer, error) {
	j, err := jose.ParseJWK(data)
	if err != nil {
		return nil, err
	}
	if !j.IsPrivate() {
		return nil, errors.New("JWK holds no private key")
	}
	if kid == "" && j.KeyID == "" && j.KeyType() != "oct" {
		kid = j.Thumbprint()
	}
	if kid != "" && kid != j.KeyID {
		if j, err = withKeyID(data, kid); err != nil {
			return nil, err
		}
	}
	return j.Signer(alg)
}

// checkKeyID refuses a kid that is not UTF-8 before any path renames a key
// with it: JSON would replace the bad bytes, and tokens would name a kid
// the keys do not have.
func checkKeyID(kid string) error {
	if !utf8.ValidString(kid) {
		return errors.New("kid is not valid UTF-8")
	}
	return nil
}

// withKeyID re-parses a JWK with its "kid" member replaced: jose binds a
// JWK's kid into the signer and offers no other way to change it.
func withKeyID(data []byte, kid string) (*jose.JWK, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	k, err := json.Marshal(kid)
	if err != nil {
		return nil, err
	}
	m["kid"] = k
	if data, err = json.Marshal(m); err != nil {
		return nil, err
	}
	return jose.ParseJWK(data)
}

func thumbprint(alg jose.Alg, pub crypto.PublicKey) (string, error) {
	k, err := jose.NewKey(alg, "", pub)
	if err != nil {
		return "", err
	}
	return k.Thumbprint(), nil
}

// LoadKeys reads verification keys from a PEM (public or private key), JWK
// or JWKS file, bound to every algorithm of algs that fits them, or with no
// algs to the one each key implies. A key without a kid gets kid, or its
// RFC 7638 thumbprint; kid cannot rename the keys of a JWKS.
func LoadKeys(path string, algs []jose.Alg, kid string) ([]*jose.Key, error) {
	data, err := Read(path)
	if err != nil {
		return nil, err
	}
	keys, err := ParseKeys(data, algs, kid)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}

// ParseKeys is LoadKeys on a file's contents.
func ParseKeys(data []byte, algs []jose.Alg, kid string) ([]*jose.Key, error) {
	if err := checkKeyID(kid); err != nil {
		return nil, err
	}
	switch sniff(data) {
	case formatJWKS:
		return jwksKeys(data, algs, kid)
	case formatJWK:
		return jwkKeys(data, algs, kid)
	default:
		return pemKeys(data, algs, kid)
	}
}

// LoadSecretKeys reads a raw HMAC secret from path and binds it to each of
// algs (HS256 when none) under kid, which may be empty.
func LoadSecretKeys(path string, algs []jose.Alg, kid string) ([]*jose.Key, error) {
	secret, err := Read(path)
	if err != nil {
		return nil, err
	}
	if len(algs) == 0 {
		algs = []jose.Alg{jose.HS256}
	}
	keys, err := bindEach(algs, func(a jose.Alg) (*jose.Key, error) {
		return jose.NewHMACKey(a, kid, secret)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}

func pemKeys(data []byte, algs []jose.Alg, kid string) ([]*jose.Key, error) {
	pub, err := pemPublic(data)
	if err != nil {
		return nil, err
	}
	if len(algs) == 0 {
		a, err := DefaultAlg(pub)
		if err != nil {
			return nil, err
		}
		algs = []jose.Alg{a}
	}
	return bindEach(algs, func(a jose.Alg) (*jose.Key, error) {
		k, err := jose.NewKey(a, kid, pub)
		if err != nil || kid != "" {
			return k, err
		}
		return k.WithKeyID(k.Thumbprint()), nil
	})
}

func pemPublic(data []byte) (crypto.PublicKey, error) {
	if !isPrivatePEM(data) {
		return jose.ParsePublicPEM(data)
	}
	priv, err := jose.ParsePrivatePEM(data)
	if err != nil {
		return nil, err
	}
	return priv.Public(), nil
}

func jwkKeys(data []byte, algs []jose.Alg, kid string) ([]*jose.Key, error) {
	j, err := jose.ParseJWK(data)
	if err != nil {
		return nil, err
	}
	if len(algs) == 0 {
		if algs, err = j.Algs(nil); err != nil {
			return nil, err
		}
	}
	if kid == "" && j.KeyID == "" && j.KeyType() != "oct" {
		kid = j.Thumbprint()
	}
	return bindEach(algs, func(a jose.Alg) (*jose.Key, error) {
		k, err := j.Key(a)
		if err != nil || kid == "" {
			return k, err
		}
		return k.WithKeyID(kid), nil
	})
}

func jwksKeys(data []byte, algs []jose.Alg, kid string) ([]*jose.Key, error) {
	if kid != "" {
		return nil, errors.New("is a JWKS; a kid cannot rename its keys")
	}
	set, err := jose.ParseKeySet(data, algs...)
	if err != nil {
		return nil, err
	}
	var keys []*jose.Key
	for _, k := range set.Keys() {
		if len(algs) == 0 || slices.Contains(algs, k.Alg()) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, errors.Join(append([]error{errors.New("JWKS has no usable key")}, set.Skipped()...)...)
	}
	return keys, nil
}

// bindEach binds a key to each alg, keeping those that fit; it fails only
// when none does.
func bindEach(algs []jose.Alg, bind func(jose.Alg) (*jose.Key, error)) ([]*jose.Key, error) {
	var keys []*jose.Key
	var errs []error
	for _, a := range algs {
		k, err := bind(a)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.Join(errs...)
	}
	return keys, nil
}
