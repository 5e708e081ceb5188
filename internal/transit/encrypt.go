package transit

import (
	"context"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"slices"
	"sync"
	"unsafe"
)

// EncryptOptions are the per-item parameters of encrypt, rewrap and datakey.
type EncryptOptions struct {
	// KeyVersion is the version to encrypt with: 0 for the latest, or one
	// from min_encryption_version to the latest.
	KeyVersion int
	// Context is required by derived keys and ignored by others.
	Context []byte
	// AssociatedData is authenticated with the AEAD types (and must be given
	// again to decrypt). With convergent encryption it is refused: the
	// nonce depends on the plaintext only, so the same plaintext under two
	// associated data would reuse a nonce with different authenticated
	// data, which gives away the authentication key (Vault accepts it).
	AssociatedData []byte
	// Caller is whom an RSA encryption is made for: it waits for a worker
	// in the caller's turn (see Caller). The AEAD types need none.
	Caller Caller

	ticket *ticket // a batch's, for its items
}

// DecryptOptions are the per-item parameters of decrypt.
type DecryptOptions struct {
	Context        []byte
	AssociatedData []byte
	// Caller is whom an RSA decryption is made for: it waits for a
	// private-key worker in the caller's turn (see Caller).
	Caller Caller

	ticket *ticket // a batch's, for its items
}

// Result is what encrypt, rewrap, sign and hmac return: the "vault:vN:..."
// text and the version that made it.
type Result struct {
	Text       string
	KeyVersion int
}

// DecryptResult is a decrypted plaintext and the version that encrypted it.
type DecryptResult struct {
	Plaintext  []byte
	KeyVersion int
}

// encryptVersion resolves an encryption (or signing, or hmac) version
// request by Vault's rules.
func (k *Key) encryptVersion(n int) (*Version, error) {
	switch {
	case n == 0:
		return k.latest(), nil
	case n < 0:
		return nil, errNegativeVersion
	case n > k.cfg.LatestVersion:
		return nil, versionError(ReasonUnknownVersion, "requested version is newer than the latest version", n)
	case n < k.cfg.MinEncryptionVersion:
		return nil, versionError(ReasonVersionTooOld, "requested version is below min_encryption_version", n)
	case n < k.cfg.MinDecryptionVersion:
		// With min_encryption_version 0 Vault still cannot use such a
		// version: it is archived, out of the policy.
		return nil, versionError(ReasonVersionTooOld, "requested version is below min_decryption_version", n)
	}
	if v := k.version(n); v != nil {
		return v, nil
	}
	return nil, versionError(ReasonVersionNotLoaded, "requested version is not loaded", n)
}

// decryptVersion resolves the version a ciphertext, signature or HMAC names.
func (k *Key) decryptVersion(n int) (*Version, error) {
	switch {
	case n > k.cfg.LatestVersion:
		return nil, versionError(ReasonUnknownVersion, "version is newer than the key's latest version", n)
	case n < k.cfg.MinDecryptionVersion:
		return nil, versionError(ReasonVersionTooOld, "version is below min_decryption_version", n)
	}
	if v := k.version(n); v != nil {
		return v, nil
	}
	return nil, versionError(ReasonVersionNotLoaded, "version is not loaded", n)
}

var (
	errNoEncryption  = newError(ReasonUnsupported, "the key type does not support encryption")
	errNoAD          = newError(ReasonUnsupported, "associated_data given for a key type that is not an AEAD")
	errConvergentAD  = newError(ReasonInvalidRequest, "associated_data cannot be used with convergent encryption")
	errNoPrivateRSA  = newError(ReasonNoPrivateKey, "the version holds only a public key")
	errRSADecrypt    = newError(ReasonDecryptionFailed, "RSA-OAEP decryption failed")
	errBadDataKeyLen = newError(ReasonInvalidRequest, "bits must be 128, 256 or 512")
)

func (k *Key) checkEncrypt(plaintext []byte, o *EncryptOptions) error {
	if !k.cfg.Type.Capabilities().Encryption {
		return errNoEncryption
	}
	if len(plaintext) > MaxInputBytes {
		return errInputTooLarge
	}
	return k.checkCommon(o.Context, o.AssociatedData, true)
}

func (k *Key) checkCommon(context, ad []byte, encrypt bool) error {
	if len(context) > MaxContextBytes {
		return errContextTooLarge
	}
	if len(ad) > 0 {
		if !k.cfg.Type.Capabilities().AssociatedData {
			return errNoAD
		}
		if len(ad) > MaxInputBytes {
			return errADTooLarge
		}
		if encrypt && k.cfg.ConvergentEncryption {
			return errConvergentAD
		}
	}
	if k.cfg.Derived && len(context) == 0 {
		return errMissingContext
	}
	return nil
}

// sealLen is the length of nonce‖ciphertext‖tag (or of an RSA-OAEP
// ciphertext) for a plaintext of n bytes.
func (k *Key) sealLen(v *Version, n int) int {
	if v.typ.isRSA() {
		return v.rsaPub.Size()
	}
	return v.aead.NonceSize() + n + v.aead.Overhead()
}

// textLen is the length of the "vault:vN:" text of a sealed payload.
func textLen(version, sealed int) int {
	return prefixLen(version) + base64.StdEncoding.EncodedLen(sealed)
}

// aeadFor returns the AEAD for v and, for convergent keys, the key of the
// nonce's HMAC.
func (e *Engine) aeadFor(k *Key, v *Version, context []byte) (aeadLike, []byte, error) {
	if !k.cfg.Derived {
		return v.aead, nil, nil
	}
	d, err := e.derived.get(v, context, k.cfg.ConvergentEncryption)
	if err != nil {
		return nil, nil, err
	}
	return d.aead, d.nonceKey, nil
}

// aeadLike is cipher.AEAD (named here to keep the signatures short).
type aeadLike = interface {
	NonceSize() int
	Overhead() int
	Seal(dst, nonce, plaintext, additionalData []byte) []byte
	Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error)
}

// seal appends nonce‖ciphertext‖tag (AEAD types) or the RSA-OAEP
// ciphertext (RSA types) to dst. The AEAD path allocates nothing when dst
// has room: the nonce is read straight into dst and Seal appends after it.
// A batch passes random bytes it read for all its items at once as
// randNonce; nil means read them now. An RSA encryption waits for a worker
// (ctx bounds the wait).
func (e *Engine) seal(ctx context.Context, dst []byte, k *Key, v *Version, plaintext []byte, o *EncryptOptions, randNonce []byte) ([]byte, error) {
	if v.typ.isRSA() {
		g, err := e.turn(ctx, k, opEncrypt, o.ticket, o.Caller)
		if err != nil {
			return dst, err
		}
		defer g.done()
		// Vault: RSA-OAEP with SHA-256 and no label.
		ct, err := rsa.EncryptOAEP(sha256.New(), e.rand, v.rsaPub, plaintext, nil)
		if err != nil {
			return dst, wrapError(ReasonInvalidRequest, "RSA-OAEP encryption (the plaintext may be too long for the key)", err)
		}
		return append(dst, ct...), nil
	}
	a, nonceKey, err := e.aeadFor(k, v, o.Context)
	if err != nil {
		return dst, err
	}
	ns := a.NonceSize()
	n := len(dst)
	dst = slices.Grow(dst, ns+len(plaintext)+a.Overhead())
	nonce := dst[n : n+ns]
	if nonceKey != nil {
		// Vault's convergent version 3: the nonce is the start of
		// HMAC-SHA256 of the plaintext, under the second part of the
		// derived key.
		if beforeKeyUse != nil {
			beforeKeyUse(nonceKey)
		}
		m := hmac.New(sha256.New, nonceKey)
		m.Write(plaintext)
		var sum [sha256.Size]byte
		copy(nonce, m.Sum(sum[:0]))
	} else if len(randNonce) == ns {
		copy(nonce, randNonce)
	} else if _, err := io.ReadFull(e.rand, nonce); err != nil {
		return dst[:n], wrapError(ReasonInternal, "random source", err)
	}
	if overlaps(dst[n:cap(dst)], plaintext) {
		plaintext = slices.Clone(plaintext)
	}
	return a.Seal(dst[:n+ns], nonce, plaintext, o.AssociatedData), nil
}

// overlaps reports whether a and b share memory (the AEADs refuse, by
// panicking, to write their output over input that is not exactly aligned
// with it).
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// scratch buffers hold the binary ciphertext between the cipher and the
// base64 encoder. Buffers over scratchMax are not kept.
const scratchMax = 64 << 10

var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getScratch(n int) *[]byte {
	if n > scratchMax {
		b := make([]byte, 0, n)
		return &b
	}
	p := scratchPool.Get().(*[]byte)
	if cap(*p) < n {
		*p = make([]byte, 0, max(n, 2*cap(*p)))
	}
	return p
}

// putScratch clears what the user left in the buffer (users set *p to the
// part they wrote) and pools it.
func putScratch(p *[]byte) {
	clear(*p)
	if cap(*p) <= scratchMax {
		*p = (*p)[:0]
		scratchPool.Put(p)
	}
}

// SealRaw is the binary core of encrypt: it appends the payload Vault
// base64-encodes — nonce‖ciphertext‖tag for the AEAD types, the RSA-OAEP
// ciphertext for RSA keys — to dst, and returns the version used. With room
// in dst it allocates nothing for non-derived AEAD keys. An RSA encryption
// runs on a worker, in o.Caller's turn; ctx bounds the wait for one.
func (e *Engine) SealRaw(ctx context.Context, dst []byte, k *Key, plaintext []byte, o EncryptOptions) ([]byte, int, error) {
	if err := k.checkEncrypt(plaintext, &o); err != nil {
		return dst, 0, err
	}
	v, err := k.encryptVersion(o.KeyVersion)
	if err != nil {
		return dst, 0, err
	}
	out, err := e.seal(ctx, dst, k, v, plaintext, &o, nil)
	return out, v.num, err
}

// AppendEncrypt encrypts plaintext and appends Vault's text,
// "vault:vN:" + base64(nonce‖ciphertext‖tag), to dst (the HTTP layer's
// response buffer), returning the version used. With room in dst it
// allocates nothing for non-derived AEAD keys. An RSA encryption runs on a
// worker, in o.Caller's turn; ctx bounds the wait for one.
func (e *Engine) AppendEncrypt(ctx context.Context, dst []byte, k *Key, plaintext []byte, o EncryptOptions) ([]byte, int, error) {
	if err := k.checkEncrypt(plaintext, &o); err != nil {
		return dst, 0, err
	}
	v, err := k.encryptVersion(o.KeyVersion)
	if err != nil {
		return dst, 0, err
	}
	return e.appendEncrypt(ctx, dst, k, v, plaintext, &o, nil)
}

func (e *Engine) appendEncrypt(ctx context.Context, dst []byte, k *Key, v *Version, plaintext []byte, o *EncryptOptions, randNonce []byte) ([]byte, int, error) {
	sealed := k.sealLen(v, len(plaintext))
	sp := getScratch(sealed)
	defer putScratch(sp)
	bin, err := e.seal(ctx, (*sp)[:0], k, v, plaintext, o, randNonce)
	*sp = bin
	if err != nil {
		return dst, 0, err
	}
	dst = slices.Grow(dst, textLen(v.num, len(bin)))
	dst = appendPrefix(dst, v.num)
	return appendB64(dst, bin), v.num, nil
}

// Encrypt is AppendEncrypt returning a string.
func (e *Engine) Encrypt(ctx context.Context, k *Key, plaintext []byte, o EncryptOptions) (Result, error) {
	b, n, err := e.AppendEncrypt(ctx, nil, k, plaintext, o)
	if err != nil {
		return Result{}, err
	}
	return Result{Text: string(b), KeyVersion: n}, nil
}

// OpenRaw is the binary core of decrypt: it decrypts payload (what SealRaw
// wrote) as version n of k and appends the plaintext to dst. RSA keys use a
// private-key worker, in o.Caller's turn; ctx bounds the wait for one.
func (e *Engine) OpenRaw(ctx context.Context, dst []byte, k *Key, n int, payload []byte, o DecryptOptions) ([]byte, error) {
	if !k.cfg.Type.Capabilities().Decryption {
		return dst, newError(ReasonUnsupported, "the key type does not support decryption")
	}
	if err := k.checkCommon(o.Context, o.AssociatedData, false); err != nil {
		return dst, err
	}
	v, err := k.decryptVersion(n)
	if err != nil {
		return dst, err
	}
	return e.open(ctx, dst, k, v, payload, &o)
}

func (e *Engine) open(ctx context.Context, dst []byte, k *Key, v *Version, payload []byte, o *DecryptOptions) ([]byte, error) {
	if v.typ.isRSA() {
		if v.rsa == nil {
			return dst, errNoPrivateRSA
		}
		g, err := e.work(ctx, o.ticket, o.Caller, k.cost(opDecrypt))
		if err != nil {
			return dst, err
		}
		defer g.done()
		pt, err := rsa.DecryptOAEP(sha256.New(), nil, v.rsa, payload, nil)
		if err != nil {
			return dst, errRSADecrypt
		}
		return append(dst, pt...), nil
	}
	a, _, err := e.aeadFor(k, v, o.Context)
	if err != nil {
		return dst, err
	}
	ns := a.NonceSize()
	if len(payload) < ns+a.Overhead() {
		return dst, errShort
	}
	if overlaps(dst[len(dst):cap(dst)], payload) {
		payload = slices.Clone(payload)
	}
	out, err := a.Open(dst, payload[:ns], payload[ns:], o.AssociatedData)
	if err != nil {
		return dst, errOpenFailed
	}
	return out, nil
}

// AppendDecrypt reads a "vault:vN:base64" ciphertext, checks its version
// against the key (a version newer than the latest is ErrUnknownVersion:
// re-read the key and retry once; below min_decryption_version is
// ErrVersionTooOld), decrypts it with exactly that version and appends the
// plaintext to dst. With room in dst it allocates nothing for non-derived
// AEAD keys.
func (e *Engine) AppendDecrypt(ctx context.Context, dst []byte, k *Key, ciphertext []byte, o DecryptOptions) ([]byte, int, error) {
	return appendDecrypt(e, ctx, dst, k, ciphertext, &o)
}

func appendDecrypt[T string | []byte](e *Engine, ctx context.Context, dst []byte, k *Key, ciphertext T, o *DecryptOptions) ([]byte, int, error) {
	if !k.cfg.Type.Capabilities().Decryption {
		return dst, 0, newError(ReasonUnsupported, "the key type does not support decryption")
	}
	if len(ciphertext) > MaxInputBytes {
		return dst, 0, errInputTooLarge
	}
	if err := k.checkCommon(o.Context, o.AssociatedData, false); err != nil {
		return dst, 0, err
	}
	n, payload, err := splitText(ciphertext)
	if err != nil {
		return dst, 0, err
	}
	v, err := k.decryptVersion(n)
	if err != nil {
		return dst, 0, err
	}
	sp := getScratch(base64.StdEncoding.DecodedLen(len(payload)))
	defer putScratch(sp)
	bin, err := decodeStd((*sp)[:0], payload)
	*sp = bin
	if err != nil {
		return dst, 0, err
	}
	out, err := e.open(ctx, dst, k, v, bin, o)
	return out, n, err
}

// Decrypt is AppendDecrypt for a string, returning a new plaintext slice.
func (e *Engine) Decrypt(ctx context.Context, k *Key, ciphertext string, o DecryptOptions) (DecryptResult, error) {
	pt, n, err := appendDecrypt(e, ctx, nil, k, ciphertext, &o)
	if err != nil {
		return DecryptResult{}, err
	}
	if pt == nil {
		pt = []byte{}
	}
	return DecryptResult{Plaintext: pt, KeyVersion: n}, nil
}

// RewrapOptions are rewrap's parameters: the version to encrypt with (0 for
// the latest) and the context and associated data, the same for both
// directions. (Vault's rewrap takes no associated_data; here it may.)
type RewrapOptions struct {
	KeyVersion     int
	Context        []byte
	AssociatedData []byte
	Caller         Caller // whom an RSA decryption and encryption are made for (see DecryptOptions)

	ticket *ticket // a batch's, for its items
}

// AppendRewrap decrypts a ciphertext and appends its encryption under the
// requested version (the latest by default) to dst. The plaintext lives only
// in a scratch buffer that is cleared before AppendRewrap returns.
func (e *Engine) AppendRewrap(ctx context.Context, dst []byte, k *Key, ciphertext []byte, o RewrapOptions) ([]byte, int, error) {
	return appendRewrap(e, ctx, dst, k, ciphertext, &o)
}

func appendRewrap[T string | []byte](e *Engine, ctx context.Context, dst []byte, k *Key, ciphertext T, o *RewrapOptions) ([]byte, int, error) {
	eo := EncryptOptions{KeyVersion: o.KeyVersion, Context: o.Context, AssociatedData: o.AssociatedData, Caller: o.Caller, ticket: o.ticket}
	if err := k.checkEncrypt(nil, &eo); err != nil {
		return dst, 0, err
	}
	v, err := k.encryptVersion(o.KeyVersion)
	if err != nil {
		return dst, 0, err
	}
	sp := getScratch(base64.StdEncoding.DecodedLen(len(ciphertext)))
	defer putScratch(sp)
	pt, _, err := appendDecrypt(e, ctx, (*sp)[:0], k, ciphertext, &DecryptOptions{Context: o.Context, AssociatedData: o.AssociatedData, Caller: o.Caller, ticket: o.ticket})
	*sp = pt
	if err != nil {
		return dst, 0, err
	}
	return e.appendEncrypt(ctx, dst, k, v, pt, &eo, nil)
}

// Rewrap is AppendRewrap for strings.
func (e *Engine) Rewrap(ctx context.Context, k *Key, ciphertext string, o RewrapOptions) (Result, error) {
	b, n, err := appendRewrap(e, ctx, nil, k, ciphertext, &o)
	if err != nil {
		return Result{}, err
	}
	return Result{Text: string(b), KeyVersion: n}, nil
}

// DataKey is a new random key and its encryption under a transit key.
// Plaintext is empty for Vault's "wrapped" form.
type DataKey struct {
	Plaintext  Secret
	Ciphertext string
	KeyVersion int
}

// DataKey makes a random key of bits (128, 256 or 512; 0 means 256) and
// encrypts it with k. With wrapped, the plaintext is cleared and not
// returned (Vault's datakey/wrapped). An RSA encryption runs on a worker,
// in o.Caller's turn; ctx bounds the wait for one.
func (e *Engine) DataKey(ctx context.Context, k *Key, bits int, wrapped bool, o EncryptOptions) (DataKey, error) {
	switch bits {
	case 0:
		bits = 256
	case 128, 256, 512:
	default:
		return DataKey{}, errBadDataKeyLen
	}
	if err := k.checkEncrypt(nil, &o); err != nil {
		return DataKey{}, err
	}
	v, err := k.encryptVersion(o.KeyVersion)
	if err != nil {
		return DataKey{}, err
	}
	key := make([]byte, bits/8)
	if _, err := io.ReadFull(e.rand, key); err != nil {
		return DataKey{}, wrapError(ReasonInternal, "random source", err)
	}
	ct, n, err := e.appendEncrypt(ctx, nil, k, v, key, &o, nil)
	if err != nil {
		clear(key)
		return DataKey{}, err
	}
	dk := DataKey{Ciphertext: string(ct), KeyVersion: n}
	if wrapped {
		clear(key)
	} else {
		dk.Plaintext = newSecret(key)
	}
	return dk, nil
}
