package transit

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/base64"
	"math/big"
	"slices"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

// SignOptions are the parameters of sign and verify, with Vault's defaults
// for zero values (sha2-256, pss, asn1, salt length auto).
type SignOptions struct {
	// KeyVersion (sign only): 0 for the latest, or one from
	// min_encryption_version to the latest.
	KeyVersion int
	// Context is required by derived (ed25519) keys.
	Context []byte
	// HashAlgorithm hashes the input for ECDSA and RSA (ed25519 signs the
	// input itself). HashNone needs Prehashed and PKCS1v15, as in Vault.
	HashAlgorithm HashAlgorithm
	// Prehashed: the input is already the digest (ECDSA, RSA).
	Prehashed bool
	// SignatureAlgorithm is PSS or PKCS1v15 (RSA only).
	SignatureAlgorithm SignatureAlgorithm
	// Marshaling: asn1 (DER ECDSA signatures, standard base64 text) or jws
	// (r‖s ECDSA signatures, unpadded base64url text, for every type).
	Marshaling Marshaling
	// SaltLength for RSA-PSS: SaltLengthAuto, SaltLengthHash or bytes.
	SaltLength int
	// Caller is whom the signature is made or checked for: both wait for
	// a worker in the caller's turn (see Caller).
	Caller Caller

	ticket *ticket // a batch's, for its items
}

func (o *SignOptions) defaults() error {
	if o.HashAlgorithm == 0 {
		o.HashAlgorithm = SHA2_256
	}
	if o.SignatureAlgorithm == 0 {
		o.SignatureAlgorithm = PSS
	}
	if o.Marshaling == 0 {
		o.Marshaling = MarshalASN1
	}
	switch {
	case o.HashAlgorithm >= maxHash:
		return newError(ReasonInvalidRequest, "unknown hash algorithm")
	case o.SignatureAlgorithm > PKCS1v15:
		return newError(ReasonInvalidRequest, "unknown signature_algorithm")
	case o.Marshaling > MarshalJWS:
		return newError(ReasonInvalidRequest, "unknown marshaling_algorithm")
	case o.HashAlgorithm == HashNone && (!o.Prehashed || o.SignatureAlgorithm != PKCS1v15):
		return newError(ReasonInvalidRequest, "hash_algorithm=none requires both prehashed=true and signature_algorithm=pkcs1v15")
	case o.SaltLength < SaltLengthHash:
		return newError(ReasonInvalidRequest, "salt_length is invalid")
	case len(o.Context) > MaxContextBytes:
		return errContextTooLarge
	}
	return nil
}

// SignResult is a signature text, the version that made it and, for a
// derived ed25519 key, the public key derived for the context (Vault's
// public_key in the sign response).
type SignResult struct {
	Signature  string
	KeyVersion int
	PublicKey  []byte
}

// VerifyResult is a verdict and the version the signature or HMAC named.
type VerifyResult struct {
	Valid      bool
	KeyVersion int
}

var errNoSigning = newError(ReasonUnsupported, "the key type does not support signing")

// digest returns what the primitive signs: the input itself for ed25519
// and prehashed inputs, else its hash, appended to buf.
func digest(buf []byte, t KeyType, input []byte, o *SignOptions) []byte {
	if t == Ed25519 || o.Prehashed {
		return input
	}
	return o.HashAlgorithm.appendSum(buf, input)
}

// Sign signs input with k (version o.KeyVersion) and returns Vault's text.
// It runs on a private-key worker, in o.Caller's turn; ctx bounds the wait
// for one.
func (e *Engine) Sign(ctx context.Context, k *Key, input []byte, o SignOptions) (SignResult, error) {
	b, n, pub, err := e.appendSign(ctx, nil, k, input, &o)
	if err != nil {
		return SignResult{}, err
	}
	return SignResult{Signature: string(b), KeyVersion: n, PublicKey: pub}, nil
}

// AppendSign appends the signature text to dst; see Sign.
func (e *Engine) AppendSign(ctx context.Context, dst []byte, k *Key, input []byte, o SignOptions) ([]byte, int, error) {
	b, n, _, err := e.appendSign(ctx, dst, k, input, &o)
	return b, n, err
}

func (e *Engine) appendSign(ctx context.Context, dst []byte, k *Key, input []byte, o *SignOptions) ([]byte, int, []byte, error) {
	if !k.cfg.Type.Capabilities().Signing {
		return dst, 0, nil, errNoSigning
	}
	if err := o.defaults(); err != nil {
		return dst, 0, nil, err
	}
	if len(input) > MaxInputBytes {
		return dst, 0, nil, errInputTooLarge
	}
	v, err := k.encryptVersion(o.KeyVersion)
	if err != nil {
		return dst, 0, nil, err
	}
	if !v.HasPrivateKey() {
		return dst, 0, nil, versionError(ReasonNoPrivateKey, "the version holds only a public key", v.num)
	}
	if k.cfg.Derived && len(o.Context) == 0 {
		return dst, 0, nil, errMissingContext
	}
	h := cryptoHash(o.HashAlgorithm)
	if v.typ.isRSA() && o.SignatureAlgorithm == PSS {
		if err := checkSalt(v.rsaPub, h, o.SaltLength); err != nil {
			return dst, 0, nil, err
		}
	}
	g, err := e.turn(ctx, k, opSign, o.ticket, o.Caller)
	if err != nil {
		return dst, 0, nil, err
	}
	defer g.done()
	var (
		sum [64]byte
		sig []byte
		pub []byte
	)
	msg := digest(sum[:0], v.typ, input, o)
	switch {
	case v.typ.isECDSA():
		der, err := ecdsa.SignASN1(e.rand, v.ec, msg)
		if err != nil {
			return dst, 0, nil, wrapError(ReasonInternal, "ECDSA signing", err)
		}
		sig = der
		if o.Marshaling == MarshalJWS {
			if sig, err = derToP1363(der, curveBytes(v.typ)); err != nil {
				return dst, 0, nil, err
			}
		}
	case v.typ == Ed25519:
		priv := ed25519.PrivateKey(v.key)
		if k.cfg.Derived {
			d, err := e.derived.get(v, o.Context, false)
			if err != nil {
				return dst, 0, nil, err
			}
			priv = d.ed
			pub = slices.Clone(priv[32:])
			if beforeKeyUse != nil {
				beforeKeyUse(priv)
			}
		}
		sig = ed25519.Sign(priv, msg)
	case v.typ.isRSA():
		var err error
		if o.SignatureAlgorithm == PSS {
			sig, err = rsa.SignPSS(e.rand, v.rsa, h, msg, &rsa.PSSOptions{SaltLength: o.SaltLength})
		} else {
			sig, err = rsa.SignPKCS1v15(e.rand, v.rsa, h, msg)
		}
		if err != nil {
			return dst, 0, nil, wrapError(ReasonInvalidRequest, "RSA signing (a prehashed input must be the digest's length)", err)
		}
	}
	dst = appendPrefix(dst, v.num)
	if o.Marshaling == MarshalJWS {
		dst = base64.RawURLEncoding.AppendEncode(dst, sig)
	} else {
		dst = appendB64(dst, sig)
	}
	return dst, v.num, pub, nil
}

func cryptoHash(h HashAlgorithm) crypto.Hash {
	if h > HashNone && h < maxHash {
		return cryptoHashes[h]
	}
	return 0 // none: PKCS #1 v1.5 without a DigestInfo
}

// checkSalt applies Vault's bounds on an RSA-PSS salt length: from "hash"
// (-1) to the longest the key and hash allow.
func checkSalt(pub *rsa.PublicKey, h crypto.Hash, salt int) error {
	maxSalt := (pub.N.BitLen()-1+7)/8 - 2 - h.Size()
	if salt < SaltLengthHash || salt > maxSalt {
		return newError(ReasonInvalidRequest, "salt_length is invalid for the key and hash")
	}
	return nil
}

// parseECDSASig reads an ASN.1 ECDSA signature exactly as
// ecdsa.VerifyASN1 does (the same cryptobyte calls): r and s as unsigned
// big-endian bytes, or false where ecdsa.VerifyASN1 would refuse it unparsed.
func parseECDSASig(sig []byte) (r, s []byte, ok bool) {
	var inner cryptobyte.String
	in := cryptobyte.String(sig)
	if !in.ReadASN1(&inner, asn1.SEQUENCE) || !in.Empty() ||
		!inner.ReadASN1Integer(&r) || !inner.ReadASN1Integer(&s) || !inner.Empty() {
		return nil, nil, false
	}
	return r, s, true
}

// derToP1363 converts a DER ECDSA signature to fixed-width r‖s.
func derToP1363(der []byte, width int) ([]byte, error) {
	var r, s []byte
	in := cryptobyte.String(der)
	var seq cryptobyte.String
	if !in.ReadASN1(&seq, asn1.SEQUENCE) || !in.Empty() ||
		!seq.ReadASN1Integer(&r) || !seq.ReadASN1Integer(&s) || !seq.Empty() {
		return nil, newError(ReasonInternal, "ECDSA signature encoding")
	}
	r, s = trimZeros(r), trimZeros(s)
	if len(r) > width || len(s) > width {
		return nil, newError(ReasonInternal, "ECDSA signature encoding")
	}
	out := make([]byte, 2*width)
	copy(out[width-len(r):], r)
	copy(out[2*width-len(s):], s)
	return out, nil
}

func trimZeros(b []byte) []byte {
	for len(b) > 0 && b[0] == 0 {
		b = b[1:]
	}
	return b
}

// Verify checks a signature text made by Sign (or by Vault) against input.
// A wrong signature is Valid false with no error; an error means the text
// or the request is unusable (malformed text, a version newer than the key's
// latest — ErrUnknownVersion — or below min_decryption_version). The check
// runs on a worker, in o.Caller's turn; ctx bounds the wait for one.
func (e *Engine) Verify(ctx context.Context, k *Key, input []byte, signature string, o SignOptions) (VerifyResult, error) {
	return verifySig(e, ctx, k, input, signature, &o)
}

// VerifyBytes is Verify for a signature text held in a byte slice.
func (e *Engine) VerifyBytes(ctx context.Context, k *Key, input, signature []byte, o SignOptions) (VerifyResult, error) {
	return verifySig(e, ctx, k, input, signature, &o)
}

func verifySig[T string | []byte](e *Engine, ctx context.Context, k *Key, input []byte, signature T, o *SignOptions) (VerifyResult, error) {
	if !k.cfg.Type.Capabilities().Signing {
		return VerifyResult{}, errNoSigning
	}
	if err := o.defaults(); err != nil {
		return VerifyResult{}, err
	}
	if len(input) > MaxInputBytes || len(signature) > MaxInputBytes {
		return VerifyResult{}, errInputTooLarge
	}
	n, payload, err := splitText(signature)
	if err != nil {
		return VerifyResult{}, err
	}
	var sig []byte
	if o.Marshaling == MarshalJWS {
		sig, err = decodeB64(urlB64, nil, payload)
	} else {
		sig, err = decodeStd(nil, payload)
	}
	if err != nil {
		return VerifyResult{}, err
	}
	v, err := k.decryptVersion(n)
	if err != nil {
		return VerifyResult{}, err
	}
	if k.cfg.Derived && len(o.Context) == 0 {
		return VerifyResult{}, errMissingContext
	}
	var h crypto.Hash
	if v.typ.isRSA() {
		h = cryptoHash(o.HashAlgorithm)
		if o.SignatureAlgorithm == PSS {
			if err := checkSalt(v.rsaPub, h, o.SaltLength); err != nil {
				return VerifyResult{}, err
			}
		}
	}
	g, err := e.turn(ctx, k, opVerify, o.ticket, o.Caller)
	if err != nil {
		return VerifyResult{}, err
	}
	defer g.done()
	var sum [64]byte
	msg := digest(sum[:0], v.typ, input, o)
	valid := false
	switch {
	case v.p256Ver != nil:
		// The same verdicts as crypto/ecdsa below, with the version's table.
		if o.Marshaling == MarshalJWS {
			valid = v.p256Ver.VerifyP1363(msg, sig)
		} else if r, s, ok := parseECDSASig(sig); ok {
			valid = v.p256Ver.Verify(msg, r, s)
		}
	case v.typ.isECDSA():
		if o.Marshaling == MarshalJWS {
			w := curveBytes(v.typ)
			if len(sig) == 2*w {
				r := new(big.Int).SetBytes(sig[:w])
				s := new(big.Int).SetBytes(sig[w:])
				valid = ecdsa.Verify(v.ecPub, msg, r, s)
			}
		} else {
			valid = ecdsa.VerifyASN1(v.ecPub, msg, sig)
		}
	case v.typ == Ed25519:
		pub := v.edPub
		if k.cfg.Derived {
			d, err := e.derived.get(v, o.Context, false)
			if err != nil {
				return VerifyResult{}, err
			}
			pub = ed25519.PublicKey(d.ed[32:])
		}
		valid = ed25519.Verify(pub, msg, sig)
	case v.typ.isRSA():
		if o.SignatureAlgorithm == PSS {
			valid = v.rsaVer.VerifyPSS(h, msg, sig, &rsa.PSSOptions{SaltLength: o.SaltLength}) == nil
		} else {
			valid = v.rsaVer.VerifyPKCS1v15(h, msg, sig) == nil
		}
	}
	return VerifyResult{Valid: valid, KeyVersion: n}, nil
}
