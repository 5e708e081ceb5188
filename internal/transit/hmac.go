package transit

import (
	"crypto/hmac"
	"io"
)

// HMACOptions are the parameters of hmac and verify-hmac.
type HMACOptions struct {
	// KeyVersion (hmac only): 0 for the latest; otherwise at least
	// min_encryption_version.
	KeyVersion int
	// Algorithm is sha2-224/256/384/512 or sha3-224/256/384/512 (default
	// sha2-256).
	Algorithm HashAlgorithm
}

var errMACAlg = newError(ReasonInvalidRequest, "unsupported algorithm: hmac and hash take sha2-* and sha3-*")

func (o *HMACOptions) defaults() error {
	if o.Algorithm == 0 {
		o.Algorithm = SHA2_256
	}
	if !o.Algorithm.forMAC() {
		return errMACAlg
	}
	return nil
}

// hmacVersion resolves the hmac operation's version by Vault's rules (which
// differ slightly from encryption's: the latest is always allowed).
func (k *Key) hmacVersion(n int) (*Version, error) {
	if n == k.cfg.LatestVersion {
		return k.latest(), nil
	}
	return k.encryptVersion(n)
}

// appendMAC appends the HMAC of input under v's HMAC key with h.
func (v *Version) appendMAC(dst []byte, h HashAlgorithm, input []byte) []byte {
	m := v.macs[h].Get().(*mac)
	m.h.Reset()
	m.h.Write(input)
	m.sum = m.h.Sum(m.sum[:0])
	dst = append(dst, m.sum...)
	clear(m.sum)
	v.macs[h].Put(m)
	return dst
}

// AppendHMAC appends Vault's text "vault:vN:" + base64(HMAC) of input, under
// the version's HMAC key (every key type has one), to dst.
func (e *Engine) AppendHMAC(dst []byte, k *Key, input []byte, o HMACOptions) ([]byte, int, error) {
	if err := o.defaults(); err != nil {
		return dst, 0, err
	}
	if len(input) > MaxInputBytes {
		return dst, 0, errInputTooLarge
	}
	v, err := k.hmacVersion(o.KeyVersion)
	if err != nil {
		return dst, 0, err
	}
	var sum [64]byte
	mac := v.appendMAC(sum[:0], o.Algorithm, input)
	dst = appendPrefix(dst, v.num)
	dst = appendB64(dst, mac)
	clear(sum[:])
	return dst, v.num, nil
}

// HMAC is AppendHMAC returning a string.
func (e *Engine) HMAC(k *Key, input []byte, o HMACOptions) (Result, error) {
	b, n, err := e.AppendHMAC(nil, k, input, o)
	if err != nil {
		return Result{}, err
	}
	return Result{Text: string(b), KeyVersion: n}, nil
}

// VerifyHMAC checks an HMAC text against input in constant time. The
// version it names must be from min_decryption_version to the latest (a
// newer one is ErrUnknownVersion).
func (e *Engine) VerifyHMAC(k *Key, input []byte, mac string, o HMACOptions) (VerifyResult, error) {
	return verifyHMAC(k, input, mac, &o)
}

// VerifyHMACBytes is VerifyHMAC for a text held in a byte slice.
func (e *Engine) VerifyHMACBytes(k *Key, input, mac []byte, o HMACOptions) (VerifyResult, error) {
	return verifyHMAC(k, input, mac, &o)
}

func verifyHMAC[T string | []byte](k *Key, input []byte, text T, o *HMACOptions) (VerifyResult, error) {
	if err := o.defaults(); err != nil {
		return VerifyResult{}, err
	}
	if len(input) > MaxInputBytes {
		return VerifyResult{}, errInputTooLarge
	}
	n, payload, err := splitText(text)
	if err != nil {
		return VerifyResult{}, err
	}
	var given [96]byte
	tag, err := decodeStd(given[:0], payload)
	if err != nil {
		return VerifyResult{}, err
	}
	v, err := k.decryptVersion(n)
	if err != nil {
		return VerifyResult{}, err
	}
	var sum [64]byte
	want := v.appendMAC(sum[:0], o.Algorithm, input)
	ok := hmac.Equal(want, tag)
	clear(sum[:])
	return VerifyResult{Valid: ok, KeyVersion: n}, nil
}

// Hash returns the digest of input with alg (sha2-* or sha3-*, as Vault's
// hash endpoint; 0 is sha2-256). The HTTP layer encodes it as hex or base64.
func Hash(alg HashAlgorithm, input []byte) ([]byte, error) {
	return AppendHash(nil, alg, input)
}

// AppendHash appends the digest of input to dst.
func AppendHash(dst []byte, alg HashAlgorithm, input []byte) ([]byte, error) {
	if alg == 0 {
		alg = SHA2_256
	}
	if !alg.forMAC() {
		return dst, errMACAlg
	}
	if len(input) > MaxInputBytes {
		return dst, errInputTooLarge
	}
	return alg.appendSum(dst, input), nil
}

// Random returns n random bytes (1 to MaxRandomBytes) from the engine's
// random source. The HTTP layer encodes them as base64 or hex.
func (e *Engine) Random(n int) ([]byte, error) {
	if n < 1 || n > MaxRandomBytes {
		return nil, newError(ReasonInvalidRequest, "bytes must be between 1 and MaxRandomBytes")
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(e.rand, b); err != nil {
		return nil, wrapError(ReasonInternal, "random source", err)
	}
	return b, nil
}
