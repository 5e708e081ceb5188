package rootkey

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/crypto/argon2"
)

// Rotating the root key across a fleet (keygate operator rekey) needs each
// root key sealed under the other while the records are rewrapped, so
// that a node holding either one can get the other; these are the only
// functions that put a root key's bytes into a ciphertext.

// WrapKey seals root under the keyring's current root key, bound to aad,
// as Encrypt would seal its bytes.
func (k *Keyring) WrapKey(root Key, aad []byte) ([]byte, error) {
	if !root.valid() {
		return nil, ErrNoKey
	}
	return k.Encrypt(root.k.b[:], aad)
}

// UnwrapKey opens a root key WrapKey sealed, with the same aad.
func (k *Keyring) UnwrapKey(ciphertext, aad []byte) (Key, error) {
	b, err := k.Decrypt(ciphertext, aad)
	if err != nil {
		return Key{}, err
	}
	defer clear(b)
	return NewRootKey(b)
}

// Accept adds root as a key Decrypt and Rewrap accept, without making it
// current: a node that holds the new root key of a rotation still under
// way accepts the old one until every record is rewrapped. Accepting a
// key the keyring holds changes nothing.
func (k *Keyring) Accept(root Key) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	old := k.state.Load()
	if old == nil {
		return ErrSealed
	}
	e, err := newEntry(root)
	if err != nil {
		return err
	}
	if old.lookup(e.id) != nil {
		return nil
	}
	k.state.Store(&ring{current: old.current, all: append(slices.Clip(old.all), e)})
	return nil
}

// NewHeader derives a root key from passphrase with DefaultArgon2 and a
// fresh salt, as InitPassphrase does, and returns the key with the header
// that unseals it, without writing the header anywhere: a passphrase
// change hands the header to every node (see ReplaceHeader).
func NewHeader(passphrase []byte, rand io.Reader) (Key, []byte, error) {
	return newHeader(passphrase, rand, DefaultArgon2(), true)
}

// ReplaceHeader validates data as a header and puts it at path in place of
// the one there (mode 0600, written beside it, synced, then renamed), so
// that a crash leaves the old header or the new one, never a part.
func ReplaceHeader(path string, data []byte) error {
	if _, err := parseHeader(data); err != nil {
		return err
	}
	if err := replaceFile(path, data); err != nil {
		return fmt.Errorf("keyring header: %w", err)
	}
	return nil
}

// ReplaceKeyFile writes root in base64 to path in place of the key file
// there, as ReplaceHeader writes: the node's generated dev key file follows
// a rotation.
func ReplaceKeyFile(path string, root Key) error {
	if !root.valid() {
		return ErrNoKey
	}
	text := make([]byte, base64.StdEncoding.EncodedLen(KeySize)+1)
	defer clear(text)
	base64.StdEncoding.Encode(text, root.k.b[:])
	text[len(text)-1] = '\n'
	if err := replaceFile(path, text); err != nil {
		return fmt.Errorf("root key file: %w", err)
	}
	return nil
}

// replaceFile writes data beside path (mode 0600), syncs it and renames it
// over path.
func replaceFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keygate-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err = tmp.Chmod(0o600); err == nil {
		if _, err = tmp.Write(data); err == nil {
			err = tmp.Sync()
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// encodeHeader is the header file's text for h.
func encodeHeader(h *Header) ([]byte, error) {
	data, err := json.MarshalIndent(headerJSON{
		Version: headerVersion,
		KDF: kdfJSON{
			Name: "argon2id", Version: argon2.Version,
			MemoryKiB: h.params.Memory, Time: h.params.Time, Threads: h.params.Threads, Salt: h.salt,
		},
		KeyID: h.keyID.String(),
		Check: h.check,
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// CheckHeader reports whether data is a valid header made for the
// keyring's current root key (nil), as Header.CheckKey would for the key
// itself: a header handed from node to node replaces a node's own only if
// it unseals the key the node already holds.
func (k *Keyring) CheckHeader(data []byte) error {
	r := k.state.Load()
	if r == nil {
		return ErrSealed
	}
	h, err := parseHeader(data)
	if err != nil {
		return err
	}
	var pt []byte
	secretDo(func() {
		pt, err = r.current.aead.Open(nil, h.check[:nonceSize], h.check[nonceSize:], h.checkAAD())
	})
	if err != nil || subtle.ConstantTimeCompare(pt, []byte(checkLabel)) != 1 {
		return ErrWrongKey
	}
	if h.keyID != r.current.id {
		return fmt.Errorf("%w: key_id %s does not match the key's %s", ErrHeader, h.keyID, r.current.id)
	}
	return nil
}
