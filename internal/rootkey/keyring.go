package rootkey

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
)

// Options configures New. At most one key source (Root, KeyFile, KeyEnv)
// may be set; with none, the keyring starts sealed.
type Options struct {
	// Root, when not zero, unseals the keyring at once. The keyring keeps
	// its own copy; the caller may Destroy Root afterwards.
	Root Key
	// KeyFile is a root key file (see LoadKeyFile) that unseals the
	// keyring at once.
	KeyFile string
	// KeyEnv names an environment variable holding the root key in
	// base64 (see ParseKey) that unseals the keyring at once.
	KeyEnv string
	// HeaderFile is the keyring header (keyring.json in the data
	// directory) that UnsealPassphrase reads. When it is set, every root
	// key the keyring is given, by a key source here or by Unseal, must
	// also authenticate against its key-check value (ErrWrongKey
	// otherwise).
	HeaderFile string

	// Rand is the source of data keys and nonces; crypto/rand.Reader when
	// nil. It must be safe for concurrent use and cryptographically
	// secure: a predictable source voids every guarantee.
	Rand io.Reader
	// LookupEnv reads KeyEnv; os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)
}

// A Keyring holds the root keys and does envelope encryption under them.
// It is sealed (holds no key) or unsealed. Its methods are safe for
// concurrent use; Encrypt, Decrypt and Rewrap take no lock.
type Keyring struct {
	rand       io.Reader
	headerFile string

	mu      sync.Mutex           // serializes changes of state: Unseal*, Seal, Rotate, Retire
	attempt sync.Mutex           // one passphrase or verified unseal at a time; taken before mu
	state   atomic.Pointer[ring] // nil while sealed
}

// ring is an immutable snapshot of the unsealed keyring, swapped whole.
type ring struct {
	current *rootEntry
	all     []*rootEntry // every key Decrypt accepts, current included
}

type rootEntry struct {
	id   KeyID
	aead cipher.AEAD // AES-256-GCM under the root key
	prk  []byte      // HKDF-Extract of the root key, which DeriveKey expands
}

func (r *ring) lookup(id KeyID) *rootEntry {
	for _, e := range r.all {
		if e.id == id {
			return e
		}
	}
	return nil
}

// New returns a keyring. It is unsealed when opts names a key source and
// sealed otherwise; see Unseal and UnsealPassphrase.
func New(opts Options) (*Keyring, error) {
	k := &Keyring{rand: randOrDefault(opts.Rand), headerFile: opts.HeaderFile}
	sources := 0
	for _, set := range []bool{opts.Root.valid(), opts.KeyFile != "", opts.KeyEnv != ""} {
		if set {
			sources++
		}
	}
	if sources > 1 {
		return nil, errors.New("set at most one of Options.Root, KeyFile and KeyEnv")
	}
	var root Key
	var err error
	switch {
	case opts.Root.valid():
		if err := k.Unseal(opts.Root); err != nil {
			return nil, err
		}
		return k, nil
	case opts.KeyFile != "":
		root, err = LoadKeyFile(opts.KeyFile)
	case opts.KeyEnv != "":
		lookup := opts.LookupEnv
		if lookup == nil {
			lookup = os.LookupEnv
		}
		root, err = keyFromEnv(opts.KeyEnv, lookup)
	default:
		return k, nil
	}
	if err != nil {
		return nil, err
	}
	defer root.Destroy()
	if err := k.Unseal(root); err != nil {
		return nil, err
	}
	return k, nil
}

func keyFromEnv(name string, lookup func(string) (string, bool)) (Key, error) {
	v, ok := lookup(name)
	if !ok || v == "" {
		return Key{}, fmt.Errorf("%w: environment variable %s is not set", ErrNoKey, name)
	}
	root, err := parseKey([]byte(v))
	if err != nil {
		return Key{}, fmt.Errorf("environment variable %s: %w", name, err)
	}
	return root, nil
}

func newEntry(root Key) (*rootEntry, error) {
	if !root.valid() {
		return nil, ErrNoKey
	}
	var a cipher.AEAD
	var prk []byte
	var err error
	secretDo(func() {
		if a, err = newGCM(root.k.b[:]); err == nil {
			prk, err = hkdf.Extract(sha256.New, root.k.b[:], []byte(deriveSalt))
		}
	})
	if err != nil {
		return nil, err
	}
	return &rootEntry{id: root.k.id, aead: a, prk: prk}, nil
}

// deriveSalt is the HKDF salt of every key DeriveKey derives.
const deriveSalt = "keygate keyring derive v1"

// MaxDerivedSize is the most DeriveKey derives at once: HKDF-SHA256's
// limit, 255 hash lengths.
const MaxDerivedSize = 255 * sha256.Size

// DeriveKey fills out with a key derived from the current root key with
// HKDF-SHA256 (RFC 5869: the root key as input keying material, a fixed
// salt, label as info). Each label names one key, so a purpose that needs
// a key of its own (the audit log's checkpoint signer, its HMAC key) gets
// one by its label, the same on every node that holds the same root key
// and never stored anywhere. A derived key changes with the current root
// key (Rotate). It is ErrSealed while sealed; label must not be empty and
// out must hold 1 to MaxDerivedSize bytes. The caller should wipe out when
// done with it.
func (k *Keyring) DeriveKey(label string, out []byte) error {
	r := k.state.Load()
	if r == nil {
		return ErrSealed
	}
	if label == "" || len(out) == 0 || len(out) > MaxDerivedSize {
		return fmt.Errorf("DeriveKey needs a label and 1 to %d bytes, not %d", MaxDerivedSize, len(out))
	}
	var err error
	secretDo(func() {
		var b []byte
		if b, err = hkdf.Expand(sha256.New, r.current.prk, label, len(out)); err == nil {
			copy(out, b)
			clear(b)
		}
	})
	return err
}

// Unseal loads current as the key new encryptions use, and previous as
// keys that only decrypt (root keys that Rotate replaced and whose
// ciphertexts have not all been rewrapped yet). The keyring keeps its own
// copies; the caller may Destroy the keys afterwards. Unseal on an unsealed
// keyring returns ErrAlreadyUnsealed and changes nothing.
//
// With Options.HeaderFile set, current must be the key the header was made
// for (Header.CheckKey): any other returns ErrWrongKey before the keyring
// changes, whatever its KeyID.
func (k *Keyring) Unseal(current Key, previous ...Key) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.state.Load() != nil {
		return ErrAlreadyUnsealed
	}
	if err := k.checkHeader(current); err != nil {
		return err
	}
	return k.unsealLocked(current, previous)
}

// checkHeader checks root against the configured header, if any.
func (k *Keyring) checkHeader(root Key) error {
	if !root.valid() {
		return ErrNoKey
	}
	if k.headerFile == "" {
		return nil
	}
	h, err := ReadHeader(k.headerFile)
	if err != nil {
		return err
	}
	return h.CheckKey(root)
}

func (k *Keyring) unsealLocked(current Key, previous []Key) error {
	if k.state.Load() != nil {
		return ErrAlreadyUnsealed
	}
	r := &ring{}
	for i, root := range append([]Key{current}, previous...) {
		e, err := newEntry(root)
		if err != nil {
			return err
		}
		if r.lookup(e.id) != nil {
			return fmt.Errorf("%w: %s given twice", ErrKeyExists, e.id)
		}
		if i == 0 {
			r.current = e
		}
		r.all = append(r.all, e)
	}
	k.state.Store(r)
	return nil
}

// UnsealPassphrase derives the root key from passphrase with the Argon2id
// parameters and salt in Options.HeaderFile, checks it against the
// header's key-check value, and unseals with it. A wrong passphrase returns
// ErrWrongPassphrase and leaves the keyring sealed. Derivation takes
// a fraction of a second and DefaultArgon2 memory; concurrent calls run one
// at a time. The caller may wipe passphrase afterwards.
func (k *Keyring) UnsealPassphrase(passphrase []byte) error {
	return k.UnsealPassphraseVerified(passphrase, nil)
}

// A Verifier decides whether a candidate root key is the right one before
// an unseal installs it, typically by decrypting what is stored under the
// root key (the signing keys). It gets a detached keyring unsealed with
// the candidate alone, which it may Accept or Rotate to other keys (those
// of a root-key rotation under way, opened with the candidate). An error
// refuses the key, and the detached keyring is sealed; otherwise that
// keyring, as the Verifier left it, is what the unseal installs.
type Verifier func(candidate *Keyring) error

// UnsealVerified is Unseal for a root key from an untrusted caller, such
// as an unseal request. The key is checked completely before the keyring
// holds it: against the header's key-check value when a header is
// configured (ErrWrongKey), then by verify, when not nil. Only a key that
// passes both is installed, so there is no moment at which the keyring
// encrypts under a key that turns out to be wrong. Verified unseals, and
// passphrase unseals, run one at a time; the keyring is not locked while
// verify runs (Encrypt, Decrypt and Seal go on). If the keyring was
// unsealed in the meantime, the result is ErrAlreadyUnsealed.
func (k *Keyring) UnsealVerified(root Key, verify Verifier) error {
	k.attempt.Lock()
	defer k.attempt.Unlock()
	if !k.Sealed() {
		return ErrAlreadyUnsealed
	}
	if err := k.checkHeader(root); err != nil {
		return err
	}
	return k.installVerified(root, verify)
}

// UnsealPassphraseVerified is UnsealPassphrase with a Verifier: the
// derived key is checked against the header's key-check value, then by
// verify, and installed only if it passes both (see UnsealVerified).
// Derivations run one at a time, so at most one Argon2id work area (256
// MiB at most; see ReadHeader) is allocated at once.
func (k *Keyring) UnsealPassphraseVerified(passphrase []byte, verify Verifier) error {
	if k.headerFile == "" {
		return ErrNoHeader
	}
	k.attempt.Lock()
	defer k.attempt.Unlock()
	if !k.Sealed() {
		return ErrAlreadyUnsealed
	}
	h, err := ReadHeader(k.headerFile)
	if err != nil {
		return err
	}
	root, err := h.Derive(passphrase)
	if err != nil {
		return err
	}
	defer root.Destroy()
	return k.installVerified(root, verify)
}

// CheckPassphrase reports whether passphrase derives the root key the
// configured header's key-check value authenticates (nil), without
// unsealing: ErrNoHeader without a header, ErrWrongPassphrase for another
// passphrase. It shares the unseals' lock, so derivations still run one at
// a time. The caller may wipe passphrase afterwards.
func (k *Keyring) CheckPassphrase(passphrase []byte) error {
	if k.headerFile == "" {
		return ErrNoHeader
	}
	k.attempt.Lock()
	defer k.attempt.Unlock()
	h, err := ReadHeader(k.headerFile)
	if err != nil {
		return err
	}
	root, err := h.Derive(passphrase)
	if err != nil {
		return err
	}
	root.Destroy()
	return nil
}

// installVerified shows root to verify in a detached keyring, then, if
// verify accepts it, installs it. The caller holds k.attempt.
func (k *Keyring) installVerified(root Key, verify Verifier) error {
	candidate := &Keyring{rand: k.rand}
	if err := candidate.unsealLocked(root, nil); err != nil {
		return err
	}
	if verify != nil {
		if err := verify(candidate); err != nil {
			candidate.Seal()
			return err
		}
	}
	// What the verifier accepted is what is installed: the candidate, with
	// any key it was given to Accept or Rotate to (a rotation under way).
	r := candidate.state.Swap(nil)
	if r == nil {
		return ErrSealed
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.state.Load() != nil {
		return ErrAlreadyUnsealed
	}
	k.state.Store(r)
	return nil
}

// Seal drops every root key: the keyring is sealed until the next Unseal,
// and operations return ErrSealed. Operations already running finish with
// the keys they started with. The keyring never holds raw root key bytes
// (they are zeroed once the AES key schedule is built); the schedules live
// inside crypto/aes, out of this package's reach, and are released to the
// garbage collector — built with GOEXPERIMENT=runtimesecret, they are also
// erased when collected, and Seal runs a collection. Seal on a sealed
// keyring does nothing.
func (k *Keyring) Seal() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.state.Swap(nil) != nil {
		afterSeal()
	}
}

// HasHeader reports whether the keyring was given a header
// (Options.HeaderFile), whose key-check value every root key must then
// pass.
func (k *Keyring) HasHeader() bool { return k.headerFile != "" }

// Sealed reports whether the keyring is sealed.
func (k *Keyring) Sealed() bool { return k.state.Load() == nil }

// Current returns the ID of the root key new encryptions use.
func (k *Keyring) Current() (KeyID, error) {
	r := k.state.Load()
	if r == nil {
		return 0, ErrSealed
	}
	return r.current.id, nil
}

// KeyIDs returns the IDs of every root key Decrypt accepts, current first.
func (k *Keyring) KeyIDs() ([]KeyID, error) {
	r := k.state.Load()
	if r == nil {
		return nil, ErrSealed
	}
	ids := []KeyID{r.current.id}
	for _, e := range r.all {
		if e != r.current {
			ids = append(ids, e.id)
		}
	}
	return ids, nil
}

// Rotate makes newRoot the key new encryptions (and Rewrap) use. Every key
// the keyring held stays available for decryption until Retire. The
// keyring keeps its own copy of newRoot.
func (k *Keyring) Rotate(newRoot Key) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	old := k.state.Load()
	if old == nil {
		return ErrSealed
	}
	e, err := newEntry(newRoot)
	if err != nil {
		return err
	}
	if old.lookup(e.id) != nil {
		return fmt.Errorf("%w: %s", ErrKeyExists, e.id)
	}
	k.state.Store(&ring{current: e, all: append(slices.Clip(old.all), e)})
	return nil
}

// Retire drops an old root key once no stored ciphertext uses it any more
// (after a Rewrap sweep). Ciphertexts under it fail with ErrUnknownKey
// afterwards. The current key cannot be retired.
func (k *Keyring) Retire(id KeyID) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	old := k.state.Load()
	if old == nil {
		return ErrSealed
	}
	if old.current.id == id {
		return fmt.Errorf("%w: %s", ErrCurrentKey, id)
	}
	if old.lookup(id) == nil {
		return &UnknownKeyError{ID: id}
	}
	r := &ring{current: old.current}
	for _, e := range old.all {
		if e.id != id {
			r.all = append(r.all, e)
		}
	}
	k.state.Store(r)
	return nil
}

// Encrypt encrypts plaintext under a fresh data key, wraps the data key
// under the current root key, and returns the ciphertext (format version 1,
// len(plaintext)+Overhead bytes). aad is authenticated but not encrypted
// nor included: Decrypt needs the same aad. Bind it to the record the
// ciphertext belongs to, e.g. "signing-key:<kid>", so a ciphertext copied
// into another record fails to decrypt.
func (k *Keyring) Encrypt(plaintext, aad []byte) ([]byte, error) {
	r := k.state.Load()
	if r == nil {
		return nil, ErrSealed
	}
	if len(plaintext) > MaxPlaintextSize {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(plaintext), MaxPlaintextSize)
	}
	out := make([]byte, len(plaintext)+Overhead)
	var err error
	secretDo(func() { err = k.encrypt(r.current, out, plaintext, aad) })
	if err != nil {
		clear(out)
		return nil, err
	}
	return out, nil
}

// encrypt fills out. The data key is drawn straight into its slot in out
// and wrapped in place, so it is never copied elsewhere.
func (k *Keyring) encrypt(root *rootEntry, out, plaintext, aad []byte) error {
	out[0] = formatV1
	binary.BigEndian.PutUint32(out[offKeyID:], uint32(root.id))
	// Wrap nonce and data key are adjacent: one read.
	if _, err := io.ReadFull(k.rand, out[offWrapNonce:dataKeyEnd]); err != nil {
		return fmt.Errorf("random source: %w", err)
	}
	if _, err := io.ReadFull(k.rand, out[offPayloadNonce:offPayload]); err != nil {
		return fmt.Errorf("random source: %w", err)
	}
	dk, err := newGCM(out[offWrappedKey:dataKeyEnd])
	if err != nil {
		return err
	}
	dk.Seal(out[offPayload:offPayload], out[offPayloadNonce:offPayload], plaintext, aad)
	root.aead.Seal(out[offWrappedKey:offWrappedKey], out[offWrapNonce:offWrappedKey],
		out[offWrappedKey:dataKeyEnd], out[:wrapAADEnd])
	return nil
}

// Decrypt authenticates and decrypts a ciphertext from Encrypt (or Rewrap)
// made with the same aad. It returns ErrSealed, or an error matching
// ErrMalformed, ErrUnsupportedVersion, ErrUnknownKey or ErrDecrypt; it
// never panics, whatever ciphertext holds.
func (k *Keyring) Decrypt(ciphertext, aad []byte) ([]byte, error) {
	r := k.state.Load()
	if r == nil {
		return nil, ErrSealed
	}
	id, err := parseV1(ciphertext)
	if err != nil {
		return nil, err
	}
	root := r.lookup(id)
	if root == nil {
		return nil, &UnknownKeyError{ID: id}
	}
	n := len(ciphertext) - Overhead
	// The plaintext buffer doubles as scratch for the unwrapped data key,
	// which is wiped before the payload is decrypted into it.
	out := make([]byte, n, max(n, KeySize))
	var pt []byte
	secretDo(func() { pt, err = decrypt(root, out, ciphertext, aad) })
	if err != nil {
		return nil, err
	}
	return pt[:n:n], nil
}

func decrypt(root *rootEntry, out, ct, aad []byte) ([]byte, error) {
	key, err := root.aead.Open(out[:0], ct[offWrapNonce:offWrappedKey],
		ct[offWrappedKey:wrappedKeyEnd], ct[:wrapAADEnd])
	if err != nil {
		return nil, fmt.Errorf("%w (data key)", ErrDecrypt)
	}
	dk, err := newGCM(key)
	clear(out[:cap(out)])
	if err != nil {
		return nil, err
	}
	pt, err := dk.Open(out[:0], ct[offPayloadNonce:offPayload], ct[offPayload:], aad)
	if err != nil {
		return nil, ErrDecrypt
	}
	return pt, nil
}

// Rewrap re-encrypts the data key of ciphertext under the current root key
// with a fresh nonce, leaving the payload as it is, and returns the new
// ciphertext; the aad is unchanged and not needed. It authenticates the
// wrapped data key, not the payload: a ciphertext with a damaged payload
// rewraps and then fails to Decrypt as it would have before. After Rotate,
// rewrap every stored ciphertext whose CiphertextKeyID is not Current, then
// Retire the old key.
func (k *Keyring) Rewrap(ciphertext []byte) ([]byte, error) {
	r := k.state.Load()
	if r == nil {
		return nil, ErrSealed
	}
	id, err := parseV1(ciphertext)
	if err != nil {
		return nil, err
	}
	old := r.lookup(id)
	if old == nil {
		return nil, &UnknownKeyError{ID: id}
	}
	out := slices.Clone(ciphertext)
	secretDo(func() { err = k.rewrap(old, r.current, out, ciphertext) })
	if err != nil {
		clear(out[:offPayloadNonce])
		return nil, err
	}
	return out, nil
}

func (k *Keyring) rewrap(old, cur *rootEntry, out, ct []byte) error {
	// Unwrap into the data key's slot in out, then wrap it in place.
	if _, err := old.aead.Open(out[offWrappedKey:offWrappedKey], ct[offWrapNonce:offWrappedKey],
		ct[offWrappedKey:wrappedKeyEnd], ct[:wrapAADEnd]); err != nil {
		return fmt.Errorf("%w (data key)", ErrDecrypt)
	}
	binary.BigEndian.PutUint32(out[offKeyID:], uint32(cur.id))
	if _, err := io.ReadFull(k.rand, out[offWrapNonce:offWrappedKey]); err != nil {
		return fmt.Errorf("random source: %w", err)
	}
	cur.aead.Seal(out[offWrappedKey:offWrappedKey], out[offWrapNonce:offWrappedKey],
		out[offWrappedKey:dataKeyEnd], out[:wrapAADEnd])
	return nil
}
