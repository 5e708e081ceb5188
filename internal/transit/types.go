package transit

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"hash"
	"strconv"
	"strings"
)

// Documented limits. Inputs over them are refused with ErrTooLarge (or
// ErrInvalidRequest for out-of-range numbers) before any work is done.
const (
	// MaxInputBytes bounds one plaintext, signing input, HMAC input,
	// associated data or ciphertext text: Vault's default max_request_size
	// (32 MiB), which no single item inside a request can exceed anyway.
	MaxInputBytes = 32 << 20
	// MaxContextBytes bounds a derivation context (Vault has no limit; no
	// sane context comes near it).
	MaxContextBytes = 64 << 10
	// MaxCachedContextBytes: derived keys for longer contexts are derived on
	// every use and never cached, so that the cache's memory is bounded by
	// entries × this.
	MaxCachedContextBytes = 256
	// MaxBatchItems bounds a batch (Vault has no count limit; its request
	// size limit bounds it at roughly this many small items).
	MaxBatchItems = 100_000
	// MaxRandomBytes is the most Random returns at once (Vault's limit).
	MaxRandomBytes = 128 << 10
	// MaxVersion is the highest key version a "vault:vN:" text may name;
	// larger numbers are malformed, not unknown versions.
	MaxVersion = 1<<31 - 1
	// HMACMinKeySize and HMACMaxKeySize bound an hmac key's key_size in
	// bytes (Vault's HmacMinKeySize and HmacMaxKeySize).
	HMACMinKeySize = 32
	HMACMaxKeySize = 512
	// HMACDefaultKeySize is used when an hmac key is created without a
	// key_size (Vault refuses that; keygate takes 32 bytes).
	HMACDefaultKeySize = 32
	// MinAutoRotatePeriod is the shortest auto_rotate_period besides 0.
	MinAutoRotatePeriodSeconds = 3600
	// ConvergentVersion is the convergent-encryption scheme this package
	// writes and reads (Vault's current, version 3: the nonce is an HMAC of
	// the plaintext under a key derived with the encryption key).
	ConvergentVersion = 3
)

// KeyType is a transit key's algorithm, named as Vault names it.
type KeyType uint8

// The key types, with Vault's names.
const (
	AES128GCM96       KeyType = iota + 1 // "aes128-gcm96"
	AES256GCM96                          // "aes256-gcm96"
	ChaCha20Poly1305                     // "chacha20-poly1305"
	XChaCha20Poly1305                    // "xchacha20-poly1305"
	Ed25519                              // "ed25519"
	ECDSAP256                            // "ecdsa-p256"
	ECDSAP384                            // "ecdsa-p384"
	ECDSAP521                            // "ecdsa-p521"
	RSA2048                              // "rsa-2048"
	RSA3072                              // "rsa-3072"
	RSA4096                              // "rsa-4096"
	HMAC                                 // "hmac"
	maxKeyType
)

var keyTypeNames = [...]string{
	AES128GCM96:       "aes128-gcm96",
	AES256GCM96:       "aes256-gcm96",
	ChaCha20Poly1305:  "chacha20-poly1305",
	XChaCha20Poly1305: "xchacha20-poly1305",
	Ed25519:           "ed25519",
	ECDSAP256:         "ecdsa-p256",
	ECDSAP384:         "ecdsa-p384",
	ECDSAP521:         "ecdsa-p521",
	RSA2048:           "rsa-2048",
	RSA3072:           "rsa-3072",
	RSA4096:           "rsa-4096",
	HMAC:              "hmac",
}

// KeyTypes lists every key type, in declaration order.
func KeyTypes() []KeyType {
	out := make([]KeyType, 0, maxKeyType-1)
	for t := KeyType(1); t < maxKeyType; t++ {
		out = append(out, t)
	}
	return out
}

// String returns Vault's name of the type, such as "aes256-gcm96".
func (t KeyType) String() string {
	if t.valid() {
		return keyTypeNames[t]
	}
	return "unknown"
}

func (t KeyType) valid() bool { return t > 0 && t < maxKeyType }

// ParseKeyType reads a Vault key type name (case-insensitive, as Vault's
// import path reads it).
func ParseKeyType(s string) (KeyType, error) {
	for t := KeyType(1); t < maxKeyType; t++ {
		if strings.EqualFold(s, keyTypeNames[t]) {
			return t, nil
		}
	}
	return 0, newError(ReasonInvalidRequest, "unknown key type")
}

// MarshalText writes Vault's name.
func (t KeyType) MarshalText() ([]byte, error) {
	if !t.valid() {
		return nil, newError(ReasonInvalidRequest, "unknown key type")
	}
	return []byte(keyTypeNames[t]), nil
}

// UnmarshalText reads Vault's name exactly (lower case).
func (t *KeyType) UnmarshalText(b []byte) error {
	for k := KeyType(1); k < maxKeyType; k++ {
		if string(b) == keyTypeNames[k] {
			*t = k
			return nil
		}
	}
	return newError(ReasonInvalidRequest, "unknown key type")
}

// Capabilities is what a key type can do, as Vault reports it in a key's
// supports_* fields, plus what Vault checks without reporting.
type Capabilities struct {
	Encryption     bool // supports_encryption: encrypt, rewrap, datakey
	Decryption     bool // supports_decryption
	Signing        bool // supports_signing: sign and verify
	Derivation     bool // supports_derivation: derived (context) keys
	Convergent     bool // convergent_encryption (needs derivation)
	AssociatedData bool // associated_data on encrypt/decrypt/datakey
	HMAC           bool // every version of every type has an HMAC key
	PublicKeyOnly  bool // a version may hold only a public key (import)
}

// Capabilities reports what keys of type t support.
func (t KeyType) Capabilities() Capabilities {
	if t.valid() {
		return capabilities[t]
	}
	return Capabilities{}
}

var capabilities = func() (c [maxKeyType]Capabilities) {
	for t := KeyType(1); t < maxKeyType; t++ {
		c[t] = t.capabilities()
	}
	return c
}()

func (t KeyType) capabilities() Capabilities {
	c := Capabilities{HMAC: t.valid()}
	switch t {
	case AES128GCM96, AES256GCM96, ChaCha20Poly1305, XChaCha20Poly1305:
		c.Encryption, c.Decryption, c.Derivation, c.Convergent, c.AssociatedData = true, true, true, true, true
	case Ed25519:
		c.Signing, c.Derivation, c.PublicKeyOnly = true, true, true
	case ECDSAP256, ECDSAP384, ECDSAP521:
		c.Signing, c.PublicKeyOnly = true, true
	case RSA2048, RSA3072, RSA4096:
		c.Encryption, c.Decryption, c.Signing, c.PublicKeyOnly = true, true, true, true
	}
	return c
}

func (t KeyType) symmetricAEAD() bool {
	return t == AES128GCM96 || t == AES256GCM96 || t == ChaCha20Poly1305 || t == XChaCha20Poly1305
}

func (t KeyType) isECDSA() bool { return t == ECDSAP256 || t == ECDSAP384 || t == ECDSAP521 }
func (t KeyType) isRSA() bool   { return t == RSA2048 || t == RSA3072 || t == RSA4096 }

// symmetricKeySize is the raw key length of the AEAD types.
func (t KeyType) symmetricKeySize() int {
	if t == AES128GCM96 {
		return 16
	}
	return 32
}

func (t KeyType) rsaBits() int {
	switch t {
	case RSA2048:
		return 2048
	case RSA3072:
		return 3072
	case RSA4096:
		return 4096
	}
	return 0
}

// HashAlgorithm names a hash as Vault's hash_algorithm and algorithm
// parameters do ("sha2-256", ...).
type HashAlgorithm uint8

// The hash algorithms. SHA1 and HashNone exist only for signing, as in Vault.
const (
	HashNone HashAlgorithm = iota + 1 // "none": RSA PKCS#1 v1.5 over a prehashed input, no DigestInfo
	SHA1                              // "sha1" (signing only)
	SHA2_224                          // "sha2-224"
	SHA2_256                          // "sha2-256", the default everywhere
	SHA2_384                          // "sha2-384"
	SHA2_512                          // "sha2-512"
	SHA3_224                          // "sha3-224"
	SHA3_256                          // "sha3-256"
	SHA3_384                          // "sha3-384"
	SHA3_512                          // "sha3-512"
	maxHash
)

var hashNames = [...]string{
	HashNone: "none",
	SHA1:     "sha1",
	SHA2_224: "sha2-224",
	SHA2_256: "sha2-256",
	SHA2_384: "sha2-384",
	SHA2_512: "sha2-512",
	SHA3_224: "sha3-224",
	SHA3_256: "sha3-256",
	SHA3_384: "sha3-384",
	SHA3_512: "sha3-512",
}

var cryptoHashes = [...]crypto.Hash{
	SHA1:     crypto.SHA1,
	SHA2_224: crypto.SHA224,
	SHA2_256: crypto.SHA256,
	SHA2_384: crypto.SHA384,
	SHA2_512: crypto.SHA512,
	SHA3_224: crypto.SHA3_224,
	SHA3_256: crypto.SHA3_256,
	SHA3_384: crypto.SHA3_384,
	SHA3_512: crypto.SHA3_512,
}

// ParseHashAlgorithm reads a Vault hash name; "" is the default, sha2-256.
func ParseHashAlgorithm(s string) (HashAlgorithm, error) {
	if s == "" {
		return SHA2_256, nil
	}
	for h := HashAlgorithm(1); h < maxHash; h++ {
		if s == hashNames[h] {
			return h, nil
		}
	}
	return 0, newError(ReasonInvalidRequest, "unknown hash algorithm")
}

// String returns Vault's name, such as "sha2-256".
func (h HashAlgorithm) String() string {
	if h > 0 && h < maxHash {
		return hashNames[h]
	}
	return "unknown"
}

// Size is the digest length in bytes (0 for none).
func (h HashAlgorithm) Size() int {
	if h > HashNone && h < maxHash {
		return cryptoHashes[h].Size()
	}
	return 0
}

// forMAC reports whether Vault's hmac and hash endpoints take h (the SHA-2
// and SHA-3 families; not sha1, not none).
func (h HashAlgorithm) forMAC() bool { return h >= SHA2_224 && h < maxHash }

func (h HashAlgorithm) newHash() func() hash.Hash {
	switch h {
	case SHA1:
		return sha1.New
	case SHA2_224:
		return sha256.New224
	case SHA2_256:
		return sha256.New
	case SHA2_384:
		return sha512.New384
	case SHA2_512:
		return sha512.New
	case SHA3_224:
		return func() hash.Hash { return sha3.New224() }
	case SHA3_256:
		return func() hash.Hash { return sha3.New256() }
	case SHA3_384:
		return func() hash.Hash { return sha3.New384() }
	case SHA3_512:
		return func() hash.Hash { return sha3.New512() }
	}
	return nil
}

// appendSum appends the digest of input to dst without allocating for the
// fixed-size functions.
func (h HashAlgorithm) appendSum(dst, input []byte) []byte {
	switch h {
	case SHA1:
		s := sha1.Sum(input)
		return append(dst, s[:]...)
	case SHA2_224:
		s := sha256.Sum224(input)
		return append(dst, s[:]...)
	case SHA2_256:
		s := sha256.Sum256(input)
		return append(dst, s[:]...)
	case SHA2_384:
		s := sha512.Sum384(input)
		return append(dst, s[:]...)
	case SHA2_512:
		s := sha512.Sum512(input)
		return append(dst, s[:]...)
	case SHA3_224:
		s := sha3.Sum224(input)
		return append(dst, s[:]...)
	case SHA3_256:
		s := sha3.Sum256(input)
		return append(dst, s[:]...)
	case SHA3_384:
		s := sha3.Sum384(input)
		return append(dst, s[:]...)
	case SHA3_512:
		s := sha3.Sum512(input)
		return append(dst, s[:]...)
	}
	return dst
}

// Marshaling is Vault's marshaling_algorithm for signatures.
type Marshaling uint8

const (
	// MarshalASN1 ("asn1", the default): ECDSA signatures as DER, the text
	// in standard base64.
	MarshalASN1 Marshaling = iota + 1
	// MarshalJWS ("jws"): ECDSA signatures as fixed-width r‖s, the text in
	// unpadded base64url, for every key type.
	MarshalJWS
)

// ParseMarshaling reads "asn1" or "jws"; "" is asn1.
func ParseMarshaling(s string) (Marshaling, error) {
	switch s {
	case "", "asn1":
		return MarshalASN1, nil
	case "jws":
		return MarshalJWS, nil
	}
	return 0, newError(ReasonInvalidRequest, "unknown marshaling_algorithm")
}

// String returns Vault's name.
func (m Marshaling) String() string {
	switch m {
	case MarshalASN1:
		return "asn1"
	case MarshalJWS:
		return "jws"
	}
	return "unknown"
}

// SignatureAlgorithm is Vault's signature_algorithm for RSA keys.
type SignatureAlgorithm uint8

const (
	PSS      SignatureAlgorithm = iota + 1 // "pss", the default
	PKCS1v15                               // "pkcs1v15"
)

// ParseSignatureAlgorithm reads "pss" or "pkcs1v15"; "" is pss.
func ParseSignatureAlgorithm(s string) (SignatureAlgorithm, error) {
	switch s {
	case "", "pss":
		return PSS, nil
	case "pkcs1v15":
		return PKCS1v15, nil
	}
	return 0, newError(ReasonInvalidRequest, "unknown signature_algorithm")
}

// String returns Vault's name.
func (a SignatureAlgorithm) String() string {
	switch a {
	case PSS:
		return "pss"
	case PKCS1v15:
		return "pkcs1v15"
	}
	return "unknown"
}

// PSS salt lengths, Vault's "auto" and "hash" (the values of crypto/rsa's
// constants; any other value is a length in bytes).
const (
	SaltLengthAuto = rsa.PSSSaltLengthAuto       // "auto": as long as the key allows when signing, detected when verifying
	SaltLengthHash = rsa.PSSSaltLengthEqualsHash // "hash": the digest's length
)

// ParseSaltLength reads Vault's salt_length: "auto" (or ""), "hash", or a
// decimal number of bytes. Whether the number fits the key is checked when
// signing or verifying.
func ParseSaltLength(s string) (int, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return SaltLengthAuto, nil
	case "hash":
		return SaltLengthHash, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < SaltLengthHash {
		return 0, newError(ReasonInvalidRequest, "salt_length is neither auto, hash nor a length")
	}
	return n, nil
}

// ExportType is what Export returns, by Vault's names.
type ExportType uint8

const (
	ExportEncryptionKey ExportType = iota + 1 // "encryption-key"
	ExportSigningKey                          // "signing-key"
	ExportHMACKey                             // "hmac-key"
	ExportPublicKey                           // "public-key"
)

// ParseExportType reads Vault's export type names.
func ParseExportType(s string) (ExportType, error) {
	switch s {
	case "encryption-key":
		return ExportEncryptionKey, nil
	case "signing-key":
		return ExportSigningKey, nil
	case "hmac-key":
		return ExportHMACKey, nil
	case "public-key":
		return ExportPublicKey, nil
	}
	return 0, newError(ReasonInvalidRequest, "unknown export type")
}

// ExportFormat is Vault's export format parameter.
type ExportFormat uint8

const (
	FormatDefault ExportFormat = iota // "": Vault's per-type default encoding
	FormatRaw                         // "raw"
	FormatDER                         // "der" (base64 of DER)
	FormatPEM                         // "pem"
)

// ParseExportFormat reads "", "raw", "der" or "pem".
func ParseExportFormat(s string) (ExportFormat, error) {
	switch s {
	case "":
		return FormatDefault, nil
	case "raw":
		return FormatRaw, nil
	case "der":
		return FormatDER, nil
	case "pem":
		return FormatPEM, nil
	}
	return 0, newError(ReasonInvalidRequest, "unknown export format")
}
