package rootkey

import (
	"bytes"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/crypto/argon2"

	"github.com/keygate/keygate/internal/keyfile"
)

// Argon2Params are the Argon2id cost parameters that turn an unseal
// passphrase into a root key.
type Argon2Params struct {
	Memory  uint32 // KiB
	Time    uint32 // passes over memory
	Threads uint8  // lanes
}

// DefaultArgon2 returns the parameters InitPassphrase uses: 64 MiB, 3
// passes, 4 lanes — the second recommended option of RFC 9106 §4, about
// five times the memory×time cost of OWASP's minimum (19 MiB, 2 passes, 1
// lane). OWASP's figures are sized for hashing a password on every login;
// an unseal runs once per process start, so it can afford a larger cost
// per guess for an attacker who has a copy of the data directory: one
// derivation takes about 120 ms on two cores (BenchmarkDerivePassphrase),
// against about 24 ms at OWASP's minimum. Four lanes shorten the wall-clock
// time on multicore servers without lowering the attacker's cost.
func DefaultArgon2() Argon2Params {
	return Argon2Params{Memory: 64 * 1024, Time: 3, Threads: 4}
}

// minArgon2 is the floor InitPassphrase enforces: OWASP's minimum.
var minArgon2 = Argon2Params{Memory: 19 * 1024, Time: 2, Threads: 1}

// maxArgon2 caps the parameters ReadHeader accepts, so that an edited or
// damaged keyring.json cannot make an unseal exhaust the node: Argon2id's
// work area is the memory parameter (256 MiB at most, four times
// DefaultArgon2), each pass sweeps it once (16 at most) and each lane is a
// goroutine (16 at most). The header holds no secret and is often
// distributed to every node, so its parameters are input, not
// configuration. A derivation at the caps costs about 20 times as much as
// one at DefaultArgon2, and derivations run one at a time.
var maxArgon2 = Argon2Params{Memory: 256 * 1024, Time: 16, Threads: 16}

// Bounds ReadHeader enforces on the rest of the header.
const (
	minSaltSize   = 16
	maxSaltSize   = 64
	maxHeaderSize = 64 << 10
)

// SaltSize is the size of the random salt InitPassphrase draws.
const SaltSize = 16

// MinPassphraseLen is the shortest unseal passphrase InitPassphrase
// accepts, in bytes.
const MinPassphraseLen = 12

// headerVersion is the keyring header format written and read.
const headerVersion = 1

// checkLabel is the fixed plaintext of the key-check value.
const checkLabel = "keygate keyring key check v1"

// A Header is the content of the keyring header file (keyring.json in the
// data directory): what passphrase unsealing needs besides the passphrase.
// It holds no secret — the Argon2id parameters, the salt, the root key's
// ID, and a key-check value (checkLabel encrypted with AES-256-GCM under
// the derived key) that tells a wrong passphrase apart from the right one.
// The check value lets someone holding the file test passphrase guesses
// offline, at full Argon2id cost per guess; any ciphertext under the root
// key allows the same, so it adds no exposure.
type Header struct {
	params Argon2Params
	salt   []byte
	keyID  KeyID
	check  []byte // nonce || AES-256-GCM(checkLabel) || tag
}

// Params returns the Argon2id parameters the header records.
func (h *Header) Params() Argon2Params { return h.params }

// KeyID returns the ID of the root key the passphrase derives.
func (h *Header) KeyID() KeyID { return h.keyID }

// headerJSON is the file format, version 1:
//
//	{"version":1,
//	 "kdf":{"name":"argon2id","version":19,"memory_kib":65536,"time":3,"threads":4,"salt":"<base64>"},
//	 "key_id":"<8 hex digits>",
//	 "check":"<base64 of nonce||ciphertext||tag>"}
type headerJSON struct {
	Version int     `json:"version"`
	KDF     kdfJSON `json:"kdf"`
	KeyID   string  `json:"key_id"`
	Check   []byte  `json:"check"`
}

type kdfJSON struct {
	Name      string `json:"name"`
	Version   int    `json:"version"` // Argon2 version: 19 (0x13)
	MemoryKiB uint32 `json:"memory_kib"`
	Time      uint32 `json:"time"`
	Threads   uint8  `json:"threads"`
	Salt      []byte `json:"salt"`
}

// checkAAD binds the key-check value to the header's parameters and salt.
func (h *Header) checkAAD() []byte {
	return fmt.Appendf(nil, "keyring.json v%d argon2id v=%d m=%d t=%d p=%d salt=%x",
		headerVersion, argon2.Version, h.params.Memory, h.params.Time, h.params.Threads, h.salt)
}

// InitPassphrase sets up passphrase unsealing: it draws a salt from rand
// (crypto/rand.Reader when nil), derives the root key from passphrase with
// DefaultArgon2, writes the header file at path (mode 0600; it refuses to
// overwrite, with an error matching fs.ErrExist) and returns the root key,
// which the caller passes to Unseal and then Destroys. The passphrase must
// be at least MinPassphraseLen bytes; it is used exactly as given, with no
// Unicode normalization.
func InitPassphrase(path string, passphrase []byte, rand io.Reader) (Key, error) {
	return initPassphrase(path, passphrase, rand, DefaultArgon2(), true)
}

// initPassphrase is InitPassphrase with chosen parameters; enforce=false
// lets tests use parameters under the floor.
func initPassphrase(path string, passphrase []byte, rand io.Reader, p Argon2Params, enforce bool) (Key, error) {
	root, data, err := newHeader(passphrase, rand, p, enforce)
	if err != nil {
		return Key{}, err
	}
	if err := wrapWrite(keyfile.WriteNew(path, data)); err != nil {
		root.Destroy()
		return Key{}, err
	}
	return root, nil
}

// newHeader draws a salt, derives the root key from passphrase and returns
// it with the header's text.
func newHeader(passphrase []byte, rand io.Reader, p Argon2Params, enforce bool) (Key, []byte, error) {
	if len(passphrase) < MinPassphraseLen {
		return Key{}, nil, fmt.Errorf("%w: %d bytes, want at least %d", ErrWeakPassphrase, len(passphrase), MinPassphraseLen)
	}
	if enforce && (p.Memory < minArgon2.Memory || p.Time < minArgon2.Time || p.Threads < minArgon2.Threads) {
		return Key{}, nil, fmt.Errorf("Argon2id parameters %+v are under the minimum %+v", p, minArgon2)
	}
	if err := p.validate(); err != nil {
		return Key{}, nil, err
	}
	rand = randOrDefault(rand)
	h := &Header{params: p, salt: make([]byte, SaltSize)}
	if _, err := io.ReadFull(rand, h.salt); err != nil {
		return Key{}, nil, fmt.Errorf("random source: %w", err)
	}
	root := h.derive(passphrase)
	nonce := make([]byte, nonceSize)
	if _, err := io.ReadFull(rand, nonce); err != nil {
		root.Destroy()
		return Key{}, nil, fmt.Errorf("random source: %w", err)
	}
	var sealed []byte
	var err error
	secretDo(func() { sealed, err = gcmSeal(root.k.b[:], nonce, []byte(checkLabel), h.checkAAD()) })
	if err != nil {
		root.Destroy()
		return Key{}, nil, err
	}
	h.check = append(nonce, sealed...)
	h.keyID = root.ID()
	data, err := encodeHeader(h)
	if err != nil {
		root.Destroy()
		return Key{}, nil, err
	}
	return root, data, nil
}

func (p Argon2Params) validate() error {
	switch {
	case p.Threads == 0:
		return fmt.Errorf("%w: Argon2id threads is 0", ErrHeader)
	case p.Memory < 8*uint32(p.Threads):
		return fmt.Errorf("%w: Argon2id memory %d KiB is under 8 KiB per thread", ErrHeader, p.Memory)
	case p.Threads > maxArgon2.Threads:
		return fmt.Errorf("%w: Argon2id threads %d is over %d", ErrHeader, p.Threads, maxArgon2.Threads)
	case p.Memory > maxArgon2.Memory:
		return fmt.Errorf("%w: Argon2id memory %d KiB is over %d", ErrHeader, p.Memory, maxArgon2.Memory)
	case p.Time == 0 || p.Time > maxArgon2.Time:
		return fmt.Errorf("%w: Argon2id time %d is outside 1..%d", ErrHeader, p.Time, maxArgon2.Time)
	}
	return nil
}

// ReadHeader reads and validates a keyring header file. It refuses, with
// ErrHeader, Argon2id parameters over 256 MiB, 16 passes or 16 lanes, so
// that an edited header cannot make a derivation exhaust the node.
func ReadHeader(path string) (*Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxHeaderSize+1))
	if err != nil {
		return nil, fmt.Errorf("read header %s: %w", path, err)
	}
	h, err := parseHeader(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

func parseHeader(data []byte) (*Header, error) {
	if len(data) > maxHeaderSize {
		return nil, fmt.Errorf("%w: over %d bytes", ErrHeader, maxHeaderSize)
	}
	// The version first, so a newer header is reported as such rather
	// than as unknown fields.
	var probe struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHeader, err)
	}
	if probe.Version != headerVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads version %d", ErrHeader, probe.Version, headerVersion)
	}
	var j headerJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHeader, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrHeader)
	}
	if j.KDF.Name != "argon2id" || j.KDF.Version != argon2.Version {
		return nil, fmt.Errorf("%w: KDF %s version %d, want argon2id version %d", ErrHeader, j.KDF.Name, j.KDF.Version, argon2.Version)
	}
	h := &Header{
		params: Argon2Params{Memory: j.KDF.MemoryKiB, Time: j.KDF.Time, Threads: j.KDF.Threads},
		salt:   j.KDF.Salt,
		check:  j.Check,
	}
	if err := h.params.validate(); err != nil {
		return nil, err
	}
	if len(h.salt) < minSaltSize || len(h.salt) > maxSaltSize {
		return nil, fmt.Errorf("%w: salt is %d bytes, want %d to %d", ErrHeader, len(h.salt), minSaltSize, maxSaltSize)
	}
	id, err := hex.DecodeString(j.KeyID)
	if err != nil || len(id) != 4 {
		return nil, fmt.Errorf("%w: key_id %q is not 8 hex digits", ErrHeader, j.KeyID)
	}
	h.keyID = KeyID(uint32(id[0])<<24 | uint32(id[1])<<16 | uint32(id[2])<<8 | uint32(id[3]))
	if len(h.check) != nonceSize+len(checkLabel)+tagSize {
		return nil, fmt.Errorf("%w: check value is %d bytes, want %d", ErrHeader, len(h.check), nonceSize+len(checkLabel)+tagSize)
	}
	return h, nil
}

// derive runs Argon2id over passphrase with the header's parameters.
func (h *Header) derive(passphrase []byte) Key {
	k := &rootKeyBytes{live: true}
	secretDo(func() {
		key := argon2.IDKey(passphrase, h.salt, h.params.Time, h.params.Memory, h.params.Threads, KeySize)
		copy(k.b[:], key)
		clear(key)
	})
	k.id = deriveKeyID(&k.b)
	return Key{k: k}
}

// Derive derives the root key from passphrase and checks it against the
// header's key-check value (see CheckKey): a wrong passphrase returns
// ErrWrongPassphrase. It takes the time and memory the header's Argon2id
// parameters say. The caller may wipe passphrase afterwards, and should
// Destroy the key once it has unsealed a keyring with it.
func (h *Header) Derive(passphrase []byte) (Key, error) {
	if len(passphrase) == 0 {
		return Key{}, fmt.Errorf("%w: empty passphrase", ErrWrongPassphrase)
	}
	root := h.derive(passphrase)
	if err := h.checkKey(root, ErrWrongPassphrase); err != nil {
		root.Destroy()
		return Key{}, err
	}
	return root, nil
}

// CheckKey reports whether root is the key the header was made for: it
// must authenticate the header's key-check value, an AES-256-GCM
// encryption of a fixed label under the key (the GCM tag is a MAC over the
// label, the parameters and the salt, and crypto/cipher compares it in
// constant time; the label is then compared in constant time too). A key
// that does not is ErrWrongKey, whatever its KeyID: the 32-bit ID names a
// key, it does not authenticate one. A key that authenticates but whose ID
// differs from the recorded key_id means the header was edited (ErrHeader).
func (h *Header) CheckKey(root Key) error {
	return h.checkKey(root, ErrWrongKey)
}

// checkKey is CheckKey with the sentinel a mismatch returns.
func (h *Header) checkKey(root Key, mismatch error) error {
	if !root.valid() {
		return ErrNoKey
	}
	var pt []byte
	var err error
	secretDo(func() {
		pt, err = gcmOpen(root.k.b[:], h.check[:nonceSize], h.check[nonceSize:], h.checkAAD())
	})
	if err != nil && !errors.Is(err, ErrDecrypt) {
		return err
	}
	if err != nil || subtle.ConstantTimeCompare(pt, []byte(checkLabel)) != 1 {
		return mismatch
	}
	if root.ID() != h.keyID {
		// The check value authenticated, so the key is right and the
		// recorded ID was edited.
		return fmt.Errorf("%w: key_id %s does not match the key's %s", ErrHeader, h.keyID, root.ID())
	}
	return nil
}
