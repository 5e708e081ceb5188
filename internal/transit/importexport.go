package transit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"hash"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/transit/kwp"
)

// WrappingKeyBits is the size of the RSA key Vault's import wraps keys
// for, and so the length of the RSA-OAEP part of an import ciphertext.
const WrappingKeyBits = 4096

// WrappingKey is the RSA-4096 private key that Vault's BYOK import wraps the
// imported keys for. The caller generates it (rsa.GenerateKey), stores it
// sealed, and hands it to the engine; PublicKeyPEM is Vault's
// wrapping_key response.
type WrappingKey struct {
	_      noCompare
	priv   *rsa.PrivateKey
	pubPEM string
}

// NewWrappingKey checks that priv is a 4096-bit RSA key and precomputes it.
func NewWrappingKey(priv *rsa.PrivateKey) (*WrappingKey, error) {
	if priv == nil || priv.N == nil || priv.N.BitLen() != WrappingKeyBits {
		return nil, newError(ReasonInvalidRequest, "the wrapping key must be an RSA-4096 key")
	}
	if err := priv.Validate(); err != nil {
		return nil, wrapError(ReasonInvalidRequest, "the wrapping key is invalid", err)
	}
	priv.Precompute()
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		return nil, wrapError(ReasonInternal, "encoding the wrapping key", err)
	}
	return &WrappingKey{priv: priv, pubPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}, nil
}

// PublicKeyPEM is the public key in PEM (PKIX "PUBLIC KEY"), as Vault's
// wrapping_key endpoint returns it.
func (w *WrappingKey) PublicKeyPEM() string { return w.pubPEM }

// PublicKey is the RSA public key.
func (w *WrappingKey) PublicKey() *rsa.PublicKey { return &w.priv.PublicKey }

func (w *WrappingKey) String() string                { return "transit.WrappingKey{[redacted]}" }
func (w *WrappingKey) GoString() string              { return w.String() }
func (w *WrappingKey) Format(f fmt.State, verb rune) { fmt.Fprint(f, w.String()) }

// ImportOptions are the parameters of Vault's keys/:name/import.
type ImportOptions struct {
	Type KeyType
	// Ciphertext is Vault's import ciphertext, base64: RSA-OAEP (with
	// HashFunction for both OAEP and MGF1, empty label) of an ephemeral
	// AES-256 key under the wrapping key, followed by AES-KWP (RFC 5649) of
	// the key under the ephemeral key. The key is raw bytes for the
	// symmetric and hmac types and PKCS #8 DER for the others.
	Ciphertext string
	// HashFunction is SHA1, SHA224, SHA256 (the default), SHA384 or SHA512.
	HashFunction string
	// PublicKey, instead of Ciphertext, imports a public key only (PEM,
	// PKIX) for RSA, ECDSA and non-derived ed25519 keys: it can verify and
	// encrypt but not sign or decrypt.
	PublicKey            string
	Derived              bool
	Exportable           bool
	AllowPlaintextBackup bool
	AutoRotatePeriod     time.Duration
	// AllowRotation lets the engine rotate the imported key (needed for
	// auto-rotation).
	AllowRotation bool
	// Caller is whom the unwrapping, an RSA decryption, is made for (see
	// Caller).
	Caller Caller
}

var errImport = newError(ReasonImportFailed, "the import ciphertext could not be unwrapped")

func importHash(name string) (func() hash.Hash, error) {
	switch strings.ToUpper(name) {
	case "SHA1":
		return sha1.New, nil
	case "SHA224":
		return sha256.New224, nil
	case "", "SHA256":
		return sha256.New, nil
	case "SHA384":
		return sha512.New384, nil
	case "SHA512":
		return sha512.New, nil
	}
	return nil, newError(ReasonInvalidRequest, "unknown hash_function")
}

// unwrapImport returns the key material inside an import ciphertext.
func (e *Engine) unwrapImport(ctx context.Context, who Caller, w *WrappingKey, ciphertext, hashName string) ([]byte, error) {
	if w == nil {
		return nil, newError(ReasonInvalidRequest, "no wrapping key")
	}
	newHash, err := importHash(hashName)
	if err != nil {
		return nil, err
	}
	if len(ciphertext) > base64.StdEncoding.EncodedLen(WrappingKeyBits/8+kwp.WrappedLen(kwp.MaxPlaintext))+4096 {
		return nil, errInputTooLarge
	}
	raw, err := base64.StdEncoding.DecodeString(ciphertext) // line breaks allowed, as in Vault
	if err != nil {
		return nil, newError(ReasonImportFailed, "the import ciphertext is not base64")
	}
	n := w.priv.Size()
	if len(raw) <= n {
		return nil, newError(ReasonImportFailed, "the import ciphertext is too short")
	}
	g, err := e.work(ctx, nil, who, unwrapCost)
	if err != nil {
		return nil, err
	}
	defer g.done()
	eph, err := rsa.DecryptOAEP(newHash(), nil, w.priv, raw[:n], nil)
	if err != nil {
		return nil, errImport
	}
	defer clear(eph)
	if len(eph) != 32 {
		return nil, errImport
	}
	key, err := kwp.Unwrap(eph, raw[n:])
	if err != nil {
		return nil, errImport
	}
	return key, nil
}

// ImportKey creates a key from an import ciphertext (or a public key),
// Vault's keys/:name/import. The new key is marked imported: it rotates
// only with AllowRotation, and ImportVersion can add versions to it.
// Convergent encryption cannot be imported (as in Vault).
func (e *Engine) ImportKey(ctx context.Context, w *WrappingKey, name string, o ImportOptions) (*Key, error) {
	if !o.Type.valid() {
		return nil, newError(ReasonInvalidRequest, "unknown key type")
	}
	if o.AutoRotatePeriod > 0 && !o.AllowRotation {
		return nil, newError(ReasonInvalidRequest, "allow_rotation must be set to true if auto-rotation is enabled")
	}
	material, public, err := e.importMaterial(ctx, o.Caller, w, o.Ciphertext, o.HashFunction, o.PublicKey)
	if err != nil {
		return nil, err
	}
	defer clear(material)
	v, err := versionFromImport(o.Type, 1, e.now().UTC(), material, public, o.Derived, e.rand)
	if err != nil {
		return nil, err
	}
	cfg := Config{
		Name: name, Type: o.Type, LatestVersion: 1, MinDecryptionVersion: 1,
		Exportable: o.Exportable, AllowPlaintextBackup: o.AllowPlaintextBackup,
		Derived: o.Derived, AutoRotatePeriod: o.AutoRotatePeriod,
		Imported: true, AllowImportedKeyRotation: o.AllowRotation,
	}
	if o.Type == HMAC {
		cfg.KeySize = len(v.key)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return LoadKey(cfg, v)
}

func (e *Engine) importMaterial(ctx context.Context, who Caller, w *WrappingKey, ciphertext, hashName, publicKey string) ([]byte, bool, error) {
	switch {
	case ciphertext != "" && publicKey != "":
		return nil, false, newError(ReasonInvalidRequest, "only one of ciphertext and public_key can be set")
	case publicKey != "":
		if len(publicKey) > 64<<10 {
			return nil, false, errInputTooLarge
		}
		return []byte(publicKey), true, nil
	case ciphertext == "":
		return nil, false, newError(ReasonInvalidRequest, "ciphertext or public_key is required")
	}
	m, err := e.unwrapImport(ctx, who, w, ciphertext, hashName)
	return m, false, err
}

// ImportVersionOptions are the parameters of Vault's
// keys/:name/import_version.
type ImportVersionOptions struct {
	Ciphertext   string
	HashFunction string
	PublicKey    string
	Caller       Caller // as in ImportOptions
}

// ImportVersion adds an imported version as the new latest version of an
// imported key (Vault's import_version). A key rotated by the engine is no
// longer imported and refuses it, as in Vault.
func (e *Engine) ImportVersion(ctx context.Context, k *Key, w *WrappingKey, o ImportVersionOptions) (*Key, error) {
	if !k.cfg.Imported {
		return nil, newError(ReasonInvalidRequest, "import_version can only be used with an imported key")
	}
	if k.cfg.ConvergentEncryption {
		return nil, newError(ReasonInvalidRequest, "import_version cannot be used on keys with convergent encryption enabled")
	}
	if k.cfg.LatestVersion >= MaxVersion {
		return nil, newError(ReasonInvalidRequest, "the key has reached MaxVersion")
	}
	material, public, err := e.importMaterial(ctx, o.Caller, w, o.Ciphertext, o.HashFunction, o.PublicKey)
	if err != nil {
		return nil, err
	}
	defer clear(material)
	v, err := versionFromImport(k.cfg.Type, k.cfg.LatestVersion+1, e.now().UTC(), material, public, k.cfg.Derived, e.rand)
	if err != nil {
		return nil, err
	}
	if k.cfg.Type == HMAC && len(v.key) != k.cfg.KeySize {
		return nil, newError(ReasonImportFailed, "the hmac key's length differs from the key's key_size")
	}
	cfg := k.cfg
	cfg.LatestVersion++
	return k.withVersion(cfg, v), nil
}

// ExportedKey is one version's exported key, encoded as Vault encodes it.
// Private material is a Secret; the HTTP layer reveals it into the response.
type ExportedKey struct {
	Version int
	Key     Secret
}

// Export returns key material of k in Vault's encodings, for version n or,
// with n == 0, for every version from min_decryption_version to the latest
// (the versions Vault's export lists). Everything but public-key needs an
// exportable key. Encodings (format "" unless noted):
//
//   - encryption-key: AEAD types: base64 of the raw key ("" or raw); RSA:
//     PKCS #1 PEM ("RSA PRIVATE KEY"), der: base64 of PKCS #8, pem: PKCS #8
//     PEM ("PRIVATE KEY")
//   - signing-key: ECDSA: SEC 1 PEM ("EC PRIVATE KEY"), der/pem: PKCS #8;
//     ed25519: base64 of the 64-byte private key ("" or raw), der/pem:
//     PKCS #8; RSA: as for encryption-key
//   - hmac-key: base64 of the version's HMAC key ("" or raw)
//   - public-key: ECDSA and RSA: PKIX PEM, der: base64 of PKIX DER; ed25519:
//     base64 of the key ("" or raw), der/pem: PKIX
//
// A version holding only a public key exports "" as its private key, as in
// Vault.
func (e *Engine) Export(k *Key, t ExportType, n int, f ExportFormat) ([]ExportedKey, error) {
	caps := k.cfg.Type.Capabilities()
	if !k.cfg.Exportable && t != ExportPublicKey {
		return nil, newError(ReasonNotExportable, "private key material is not exportable")
	}
	switch t {
	case ExportEncryptionKey:
		if !caps.Encryption {
			return nil, newError(ReasonUnsupported, "encryption not supported for the key")
		}
	case ExportSigningKey:
		if !caps.Signing {
			return nil, newError(ReasonUnsupported, "signing not supported for the key")
		}
	case ExportPublicKey:
		if !caps.Signing {
			return nil, newError(ReasonUnsupported, "the key type has no public key")
		}
	case ExportHMACKey:
	default:
		return nil, newError(ReasonInvalidRequest, "unknown export type")
	}
	if f > FormatPEM {
		return nil, newError(ReasonInvalidRequest, "unknown export format")
	}
	lo, hi := k.cfg.MinDecryptionVersion, k.cfg.LatestVersion
	if n != 0 {
		switch {
		case n < 0 || n > k.cfg.LatestVersion:
			return nil, versionError(ReasonInvalidRequest, "version does not exist", n)
		case n < k.cfg.MinDecryptionVersion:
			return nil, versionError(ReasonVersionTooOld, "version for export is below min_decryption_version", n)
		}
		lo, hi = n, n
	}
	var out []ExportedKey
	for i := lo; i <= hi; i++ {
		v := k.version(i)
		if v == nil {
			return nil, versionError(ReasonVersionNotLoaded, "version is not loaded", i)
		}
		s, err := v.export(t, f)
		if err != nil {
			for _, x := range out {
				x.Key.Zeroize()
			}
			return nil, err
		}
		out = append(out, ExportedKey{Version: i, Key: newSecret(s)})
	}
	return out, nil
}

var errExportFormat = newError(ReasonInvalidRequest, "the format is not valid for this export type and key type")

func (v *Version) export(t ExportType, f ExportFormat) ([]byte, error) {
	b64 := func(b []byte) []byte { return base64.StdEncoding.AppendEncode(nil, b) }
	pemOf := func(typ string, der []byte, trim bool) []byte {
		p := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
		clear(der)
		if trim {
			return bytes.TrimSpace(p)
		}
		return p
	}
	switch t {
	case ExportHMACKey:
		if f == FormatDER || f == FormatPEM {
			return nil, errExportFormat
		}
		return b64(v.hmacKey), nil
	case ExportEncryptionKey, ExportSigningKey:
		switch {
		case v.typ.symmetricAEAD():
			if f == FormatDER || f == FormatPEM {
				return nil, errExportFormat
			}
			return b64(v.key), nil
		case v.typ.isRSA():
			if f == FormatRaw {
				return nil, errExportFormat
			}
			if v.rsa == nil {
				return []byte{}, nil
			}
			if f == FormatDefault {
				return pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(v.rsa), false), nil
			}
			der, err := x509.MarshalPKCS8PrivateKey(v.rsa)
			if err != nil {
				return nil, wrapError(ReasonInternal, "encoding the key", err)
			}
			if f == FormatDER {
				defer clear(der)
				return b64(der), nil
			}
			return pemOf("PRIVATE KEY", der, false), nil
		case v.typ.isECDSA():
			if f == FormatRaw {
				return nil, errExportFormat
			}
			if v.ec == nil {
				return []byte{}, nil
			}
			if f == FormatDefault {
				der, err := x509.MarshalECPrivateKey(v.ec)
				if err != nil {
					return nil, wrapError(ReasonInternal, "encoding the key", err)
				}
				return pemOf("EC PRIVATE KEY", der, true), nil
			}
			der, err := x509.MarshalPKCS8PrivateKey(v.ec)
			if err != nil {
				return nil, wrapError(ReasonInternal, "encoding the key", err)
			}
			if f == FormatDER {
				defer clear(der)
				return b64(der), nil
			}
			return pemOf("PRIVATE KEY", der, true), nil
		case v.typ == Ed25519:
			if len(v.key) == 0 {
				return []byte{}, nil
			}
			if f == FormatDefault || f == FormatRaw {
				return b64(v.key), nil
			}
			der, err := x509.MarshalPKCS8PrivateKey(ed25519.PrivateKey(v.key))
			if err != nil {
				return nil, wrapError(ReasonInternal, "encoding the key", err)
			}
			if f == FormatDER {
				defer clear(der)
				return b64(der), nil
			}
			return pemOf("PRIVATE KEY", der, true), nil
		}
	case ExportPublicKey:
		if v.typ == Ed25519 && (f == FormatDefault || f == FormatRaw) {
			return []byte(v.pubText), nil
		}
		if f == FormatRaw {
			return nil, errExportFormat
		}
		var pub any = v.ecPub
		switch {
		case v.typ == Ed25519:
			pub = v.edPub
		case v.typ.isRSA():
			pub = v.rsaPub
		}
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			return nil, wrapError(ReasonInternal, "encoding the key", err)
		}
		if f == FormatDER {
			return b64(der), nil
		}
		return pemOf("PUBLIC KEY", der, !v.typ.isRSA()), nil
	}
	return nil, newError(ReasonUnsupported, "the key type has nothing of this export type")
}
