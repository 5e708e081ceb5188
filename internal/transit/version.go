package transit

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/keygate/keygate/jose"
)

// Version is one version of a named key: its material, ready to use (the
// AEAD built, the RSA key precomputed), its creation time, and its own HMAC
// key, which the hmac operation uses for every key type (for hmac keys it is
// the key itself), as in Vault. A Version never changes after it is made, so
// snapshots share it and any number of goroutines use it at once.
//
// Nothing exported reveals the material: String, GoString and Format print
// the type and number only. The raw key bytes, the HMAC key and the words of
// the private integers live in buffers that overwrite themselves once
// nothing refers to them (wipe.go): after the Version is dropped (trimmed,
// or its key deleted) and no operation still holds them.
type Version struct {
	_       noCompare
	id      uint64 // process-unique, names the version in the derived-key cache
	num     int
	typ     KeyType
	created time.Time

	key     []byte // symmetric or hmac key; ed25519: the 64-byte private key (seed‖public)
	hmacKey []byte // the version's HMAC key (== key for hmac keys)
	aead    cipher.AEAD

	ec     *ecdsa.PrivateKey
	ecPub  *ecdsa.PublicKey
	edPub  ed25519.PublicKey
	rsa    *rsa.PrivateKey
	rsaPub *rsa.PublicKey
	rsaVer *jose.RSAVerifier // rsaPub with its modulus prepared once, for verify
	// ecdsa-p256 only: verifies with a table of ecPub's multiples, built
	// when the version is used.
	p256Ver *jose.P256Verifier

	pubText string // Vault's public_key for this version (PEM, or base64 for ed25519)

	macs [maxHash]sync.Pool // keyed hash.Hash per algorithm, reset between uses
}

var versionIDs atomic.Uint64

// Number is the version number (1 and up).
func (v *Version) Number() int { return v.num }

// Type is the key type the material belongs to.
func (v *Version) Type() KeyType { return v.typ }

// CreationTime is when the version was made (or imported).
func (v *Version) CreationTime() time.Time { return v.created }

// HasPrivateKey is false for a version imported as a public key only.
func (v *Version) HasPrivateKey() bool {
	switch {
	case v.typ.isRSA():
		return v.rsa != nil
	case v.typ.isECDSA():
		return v.ec != nil
	default:
		return len(v.key) > 0
	}
}

// String, GoString and Format name the version without its material.
func (v *Version) String() string {
	if v == nil {
		return "transit.Version(nil)"
	}
	return "transit.Version{" + v.typ.String() + " v" + strconv.Itoa(v.num) + "}"
}
func (v *Version) GoString() string              { return v.String() }
func (v *Version) Format(f fmt.State, verb rune) { fmt.Fprint(f, v.String()) }

// generateVersion makes new material of type t from r.
func generateVersion(t KeyType, num int, created time.Time, r io.Reader, hmacKeySize int) (*Version, error) {
	v := &Version{num: num, typ: t, created: created}
	if t != HMAC {
		v.hmacKey = make([]byte, 32)
		if _, err := io.ReadFull(r, v.hmacKey); err != nil {
			return nil, wrapError(ReasonInternal, "random source", err)
		}
	}
	switch {
	case t.symmetricAEAD():
		v.key = make([]byte, t.symmetricKeySize())
		if _, err := io.ReadFull(r, v.key); err != nil {
			return nil, wrapError(ReasonInternal, "random source", err)
		}
	case t == HMAC:
		v.key = make([]byte, hmacKeySize)
		if _, err := io.ReadFull(r, v.key); err != nil {
			return nil, wrapError(ReasonInternal, "random source", err)
		}
	case t == Ed25519:
		seed := make([]byte, ed25519.SeedSize)
		if _, err := io.ReadFull(r, seed); err != nil {
			return nil, wrapError(ReasonInternal, "random source", err)
		}
		v.key = ed25519.NewKeyFromSeed(seed)
		clear(seed)
	case t.isECDSA():
		k, err := generateECDSA(curveOf(t), r)
		if err != nil {
			return nil, err
		}
		v.ec = k
	case t.isRSA():
		// Since Go 1.26 crypto/rsa draws its own randomness and ignores r.
		k, err := rsa.GenerateKey(r, t.rsaBits())
		if err != nil {
			return nil, wrapError(ReasonInternal, "generating an RSA key", err)
		}
		v.rsa = k
	default:
		return nil, newError(ReasonInvalidRequest, "unknown key type")
	}
	if err := v.finish(); err != nil {
		return nil, err
	}
	return v, nil
}

// generateECDSA draws a private scalar from r by rejection sampling (a
// uniformly random string of the order's length, masked to its bit length,
// retried while it is zero or not below the order), so that the injected
// random source decides the key. crypto/ecdsa.GenerateKey ignores its reader
// since Go 1.26.
func generateECDSA(c elliptic.Curve, r io.Reader) (*ecdsa.PrivateKey, error) {
	bits := c.Params().N.BitLen()
	buf := make([]byte, (bits+7)/8)
	defer clear(buf)
	for range 100 {
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, wrapError(ReasonInternal, "random source", err)
		}
		if excess := len(buf)*8 - bits; excess > 0 {
			buf[0] &= 0xff >> excess
		}
		if k, err := ecdsa.ParseRawPrivateKey(c, buf); err == nil {
			return k, nil
		}
	}
	return nil, newError(ReasonInternal, "random source gives no valid ECDSA scalar")
}

func curveOf(t KeyType) elliptic.Curve {
	switch t {
	case ECDSAP384:
		return elliptic.P384()
	case ECDSAP521:
		return elliptic.P521()
	}
	return elliptic.P256()
}

// curveBytes is the width of one of r and s in a jws (P1363) signature.
func curveBytes(t KeyType) int { return (curveOf(t).Params().BitSize + 7) / 8 }

// finish derives everything a version needs at use from its material: the
// AEAD, the public key and its text, the RSA precomputation; and moves the
// secret bytes and private integers into buffers that overwrite themselves
// once unreachable (wipe.go). Versions of a derived key still get their
// AEAD; it is simply unused.
func (v *Version) finish() error {
	v.id = versionIDs.Add(1)
	v.key = takeKeyBytes(v.key)
	if v.typ == HMAC {
		v.hmacKey = v.key
	} else {
		v.hmacKey = takeKeyBytes(v.hmacKey)
	}
	switch {
	case v.typ.symmetricAEAD():
		a, err := newAEAD(v.typ, v.key)
		if err != nil {
			return err
		}
		v.aead = a
	case v.typ == Ed25519:
		if len(v.key) > 0 {
			v.edPub = ed25519.PrivateKey(v.key).Public().(ed25519.PublicKey)
		}
		v.pubText = base64.StdEncoding.EncodeToString(v.edPub)
	case v.typ.isECDSA():
		if v.ec != nil {
			v.ecPub = &v.ec.PublicKey
			ownWords(v.ec.D)
		}
		if v.typ == ECDSAP256 {
			v.p256Ver = jose.NewP256Verifier(v.ecPub)
		}
		der, err := x509.MarshalPKIXPublicKey(v.ecPub)
		if err != nil {
			return wrapError(ReasonInternal, "encoding the public key", err)
		}
		v.pubText = string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	case v.typ.isRSA():
		if v.rsa != nil {
			v.rsa.Precompute()
			v.rsaPub = &v.rsa.PublicKey
			ownRSAWords(v.rsa)
		}
		v.rsaVer = jose.NewRSAVerifier(v.rsaPub)
		der, err := x509.MarshalPKIXPublicKey(v.rsaPub)
		if err != nil {
			return wrapError(ReasonInternal, "encoding the public key", err)
		}
		v.pubText = string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	}
	for h := SHA2_224; h < maxHash; h++ {
		newHash, key := h.newHash(), v.hmacKey
		v.macs[h].New = func() any { return newMAC(newHash, key) }
	}
	return nil
}

// ownRSAWords moves every private integer of k into self-wiping buffers
// (crypto/rsa keeps a precomputed copy of its own that no caller can
// reach; it goes when the GC frees it).
func ownRSAWords(k *rsa.PrivateKey) {
	ownWords(k.D)
	for _, p := range k.Primes {
		ownWords(p)
	}
	ownWords(k.Precomputed.Dp)
	ownWords(k.Precomputed.Dq)
	ownWords(k.Precomputed.Qinv)
	for _, c := range k.Precomputed.CRTValues {
		ownWords(c.Exp)
		ownWords(c.Coeff)
		ownWords(c.R)
	}
}

func newAEAD(t KeyType, key []byte) (cipher.AEAD, error) {
	var (
		a   cipher.AEAD
		err error
	)
	switch t {
	case AES128GCM96, AES256GCM96:
		var b cipher.Block
		if b, err = aes.NewCipher(key); err == nil {
			a, err = cipher.NewGCM(b)
		}
	case ChaCha20Poly1305:
		a, err = chacha20poly1305.New(key)
	case XChaCha20Poly1305:
		a, err = chacha20poly1305.NewX(key)
	default:
		return nil, newError(ReasonInternal, "not an AEAD key type")
	}
	if err != nil {
		return nil, wrapError(ReasonInternal, "building the AEAD", err)
	}
	return a, nil
}

// mac is a pooled keyed hash: inner is reset to the keyed state after use.
type mac struct {
	h   hash.Hash
	sum []byte
}

func newMAC(newHash func() hash.Hash, key []byte) *mac {
	m := &mac{h: hmac.New(newHash, key)}
	m.sum = make([]byte, 0, m.h.Size())
	return m
}

// Serialization of one version for storage (the caller seals the bytes):
//
//	"KGTV" | format 1 | type | flags (bit 0: private key present) | 0
//	| version uint32 | created: unix seconds int64, nanoseconds uint32
//	| private  (uint32 length ‖ bytes): raw symmetric or hmac key,
//	  ed25519 seed, ECDSA scalar (fixed width), RSA PKCS #1 DER
//	| hmac key (uint32 length ‖ bytes): 32 bytes, empty for hmac keys
//	| public   (uint32 length ‖ bytes): only without a private key:
//	  ed25519 key, uncompressed ECDSA point, RSA PKCS #1 public DER
//
// all integers big-endian. UnmarshalVersion accepts exactly what
// MarshalVersion writes: it re-encodes what it parsed and refuses any
// difference, so every stored version has one spelling.
const (
	versionMagic   = "KGTV"
	versionFormat  = 1
	versionHeader  = 4 + 4 + 4 + 8 + 4
	maxVersionBlob = 8 << 10
	flagPrivate    = 1
)

// MarshalVersion encodes v for storage.
func MarshalVersion(v *Version) ([]byte, error) {
	priv, pub, err := v.encodeMaterial()
	if err != nil {
		return nil, err
	}
	hk := v.hmacKey
	if v.typ == HMAC {
		hk = nil
	}
	out := make([]byte, 0, versionHeader+12+len(priv)+len(hk)+len(pub))
	out = append(out, versionMagic...)
	var flags byte
	if v.HasPrivateKey() {
		flags |= flagPrivate
	}
	out = append(out, versionFormat, byte(v.typ), flags, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(v.num))
	out = binary.BigEndian.AppendUint64(out, uint64(v.created.Unix()))
	out = binary.BigEndian.AppendUint32(out, uint32(v.created.Nanosecond()))
	for _, b := range [][]byte{priv, hk, pub} {
		out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
	}
	clear(priv)
	return out, nil
}

// encodeMaterial returns the private encoding (a fresh slice the caller
// clears) or, for a public-only version, the public one.
func (v *Version) encodeMaterial() (priv, pub []byte, err error) {
	switch {
	case v.typ.symmetricAEAD() || v.typ == HMAC:
		return bytes.Clone(v.key), nil, nil
	case v.typ == Ed25519:
		if len(v.key) > 0 {
			return bytes.Clone(v.key[:ed25519.SeedSize]), nil, nil
		}
		return nil, bytes.Clone(v.edPub), nil
	case v.typ.isECDSA():
		if v.ec != nil {
			b, err := v.ec.Bytes()
			return b, nil, err
		}
		b, err := v.ecPub.Bytes()
		return nil, b, err
	case v.typ.isRSA():
		if v.rsa != nil {
			return x509.MarshalPKCS1PrivateKey(v.rsa), nil, nil
		}
		return nil, x509.MarshalPKCS1PublicKey(v.rsaPub), nil
	}
	return nil, nil, newError(ReasonInternal, "unknown key type")
}

var errCorruptVersion = newError(ReasonCorrupt, "stored key version does not parse")

// UnmarshalVersion decodes what MarshalVersion wrote. Anything else,
// including a valid key spelled differently, is ErrCorrupt.
func UnmarshalVersion(b []byte) (*Version, error) {
	if len(b) < versionHeader || len(b) > maxVersionBlob || string(b[:4]) != versionMagic || b[4] != versionFormat || b[7] != 0 {
		return nil, errCorruptVersion
	}
	t, flags := KeyType(b[5]), b[6]
	num := binary.BigEndian.Uint32(b[8:12])
	sec := int64(binary.BigEndian.Uint64(b[12:20]))
	nsec := binary.BigEndian.Uint32(b[20:24])
	if !t.valid() || flags&^flagPrivate != 0 || num == 0 || num > MaxVersion || nsec >= 1e9 {
		return nil, errCorruptVersion
	}
	rest := b[versionHeader:]
	var fields [3][]byte
	for i := range fields {
		if len(rest) < 4 {
			return nil, errCorruptVersion
		}
		n := binary.BigEndian.Uint32(rest)
		if uint64(n) > uint64(len(rest)-4) {
			return nil, errCorruptVersion
		}
		fields[i], rest = rest[4:4+n], rest[4+n:]
	}
	if len(rest) != 0 {
		return nil, errCorruptVersion
	}
	priv, hk, pub := fields[0], fields[1], fields[2]
	if flags&flagPrivate != 0 {
		if len(priv) == 0 || len(pub) != 0 {
			return nil, errCorruptVersion
		}
	} else if len(priv) != 0 || len(pub) == 0 || !t.Capabilities().PublicKeyOnly {
		return nil, errCorruptVersion
	}
	v := &Version{num: int(num), typ: t, created: time.Unix(sec, int64(nsec)).UTC()}
	if t == HMAC {
		if len(hk) != 0 {
			return nil, errCorruptVersion
		}
	} else {
		if len(hk) != 32 {
			return nil, errCorruptVersion
		}
		v.hmacKey = bytes.Clone(hk)
	}
	if err := v.setMaterial(priv, pub); err != nil {
		return nil, errCorruptVersion
	}
	if err := v.finish(); err != nil {
		return nil, errCorruptVersion
	}
	again, err := MarshalVersion(v)
	same := err == nil && bytes.Equal(again, b)
	clear(again)
	if !same {
		return nil, errCorruptVersion
	}
	return v, nil
}

var errMaterial = errors.New("key material does not match the key type")

// setMaterial parses the private (or, if priv is empty, public) encoding
// MarshalVersion writes.
func (v *Version) setMaterial(priv, pub []byte) error {
	t := v.typ
	switch {
	case t.symmetricAEAD():
		if len(priv) != t.symmetricKeySize() {
			return errMaterial
		}
		v.key = bytes.Clone(priv)
	case t == HMAC:
		if len(priv) < HMACMinKeySize || len(priv) > HMACMaxKeySize {
			return errMaterial
		}
		v.key = bytes.Clone(priv)
	case t == Ed25519:
		if len(priv) > 0 {
			if len(priv) != ed25519.SeedSize {
				return errMaterial
			}
			v.key = ed25519.NewKeyFromSeed(priv)
			return nil
		}
		if len(pub) != ed25519.PublicKeySize {
			return errMaterial
		}
		v.edPub = bytes.Clone(pub)
	case t.isECDSA():
		var err error
		if len(priv) > 0 {
			v.ec, err = ecdsa.ParseRawPrivateKey(curveOf(t), priv)
		} else {
			v.ecPub, err = ecdsa.ParseUncompressedPublicKey(curveOf(t), pub)
		}
		return err
	case t.isRSA():
		if len(priv) > 0 {
			k, err := x509.ParsePKCS1PrivateKey(priv)
			if err != nil {
				return err
			}
			if k.Size()*8 != t.rsaBits() {
				return errMaterial
			}
			v.rsa = k
			return nil
		}
		k, err := x509.ParsePKCS1PublicKey(pub)
		if err != nil {
			return err
		}
		if k.Size()*8 != t.rsaBits() {
			return errMaterial
		}
		v.rsaPub = k
	default:
		return errMaterial
	}
	return nil
}

// versionFromImport makes version num of type t from imported material:
// raw bytes, PKCS #8 DER (private) or, with public set, PEM.
func versionFromImport(t KeyType, num int, created time.Time, material []byte, public bool, derived bool, rnd io.Reader) (*Version, error) {
	bad := func(d string) error { return newError(ReasonImportFailed, d) }
	v := &Version{num: num, typ: t, created: created}
	if t != HMAC {
		v.hmacKey = make([]byte, 32)
		if _, err := io.ReadFull(rnd, v.hmacKey); err != nil {
			return nil, wrapError(ReasonInternal, "random source", err)
		}
	}
	switch {
	case public && !t.Capabilities().PublicKeyOnly:
		return nil, newError(ReasonInvalidRequest, "the key type does not support public_key import")
	case public && t == Ed25519 && derived:
		return nil, newError(ReasonInvalidRequest, "a derived ed25519 key cannot be imported as a public key")
	case t.symmetricAEAD():
		if len(material) != t.symmetricKeySize() {
			return nil, bad("wrong key size for the key type")
		}
		v.key = bytes.Clone(material)
	case t == HMAC:
		if len(material) < HMACMinKeySize || len(material) > HMACMaxKeySize {
			return nil, bad("hmac keys must be 32 to 512 bytes")
		}
		v.key = bytes.Clone(material)
	case public:
		blk, _ := pem.Decode(material)
		if blk == nil {
			return nil, bad("the public key is not PEM")
		}
		pk, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, wrapError(ReasonImportFailed, "the public key does not parse", err)
		}
		if err := v.setKey(pk); err != nil {
			return nil, err
		}
	default:
		pk, err := x509.ParsePKCS8PrivateKey(material)
		if err != nil {
			return nil, wrapError(ReasonImportFailed, "the key is not PKCS #8 DER", err)
		}
		if err := v.setKey(pk); err != nil {
			return nil, err
		}
	}
	if err := v.finish(); err != nil {
		return nil, err
	}
	return v, nil
}

// setKey takes a parsed private or public key of the version's type.
func (v *Version) setKey(k any) error {
	t := v.typ
	mismatch := newError(ReasonImportFailed, "the key does not match the key type")
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		if !t.isECDSA() || k.Curve != curveOf(t) {
			return mismatch
		}
		v.ec = k
	case *ecdsa.PublicKey:
		if !t.isECDSA() || k.Curve != curveOf(t) {
			return mismatch
		}
		v.ecPub = k
	case ed25519.PrivateKey:
		if t != Ed25519 {
			return mismatch
		}
		v.key = k // parsed for this version alone: finish moves it and overwrites it
	case ed25519.PublicKey:
		if t != Ed25519 {
			return mismatch
		}
		v.edPub = bytes.Clone(k)
	case *rsa.PrivateKey:
		if !t.isRSA() || k.Size()*8 != t.rsaBits() {
			return mismatch
		}
		v.rsa = k
	case *rsa.PublicKey:
		if !t.isRSA() || k.Size()*8 != t.rsaBits() {
			return mismatch
		}
		v.rsaPub = k
	default:
		return mismatch
	}
	return nil
}
