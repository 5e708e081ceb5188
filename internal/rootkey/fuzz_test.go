package rootkey

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecrypt feeds arbitrary ciphertexts and associated data to Decrypt,
// Rewrap and CiphertextKeyID: none may panic, each failure is one of the
// package's typed errors, and Decrypt(Encrypt(x)) == x for every x.
func FuzzDecrypt(f *testing.F) {
	root, err := NewRootKey(bytes.Repeat([]byte{7}, KeySize))
	if err != nil {
		f.Fatal(err)
	}
	other, _ := NewRootKey(bytes.Repeat([]byte{8}, KeySize))
	k, err := New(Options{Root: root})
	if err != nil {
		f.Fatal(err)
	}
	if err := k.Rotate(other); err != nil { // two keys: dispatch by ID
		f.Fatal(err)
	}

	for _, pt := range []string{"", "a", "signing key", string(bytes.Repeat([]byte{0}, 100))} {
		for _, aad := range []string{"", "signing-key:k1"} {
			ct, _ := k.Encrypt([]byte(pt), []byte(aad))
			f.Add(ct, []byte(aad))
			f.Add(ct[:len(ct)-1], []byte(aad))
			f.Add(ct[:Overhead-1], []byte(aad))
			f.Add(append([]byte{2}, ct[1:]...), []byte(aad))
		}
	}
	f.Add([]byte{}, []byte{})
	f.Add([]byte{formatV1}, []byte{})
	f.Add(make([]byte, Overhead), []byte{})
	if g, err := readGolden(); err == nil {
		f.Add([]byte(g.Ciphertext), []byte(g.AAD))
	}

	typed := func(err error) bool {
		for _, want := range []error{ErrMalformed, ErrUnsupportedVersion, ErrUnknownKey, ErrDecrypt} {
			if errors.Is(err, want) {
				return true
			}
		}
		return false
	}
	f.Fuzz(func(t *testing.T, data, aad []byte) {
		in := bytes.Clone(data)
		if _, err := k.Decrypt(data, aad); err != nil && !typed(err) {
			t.Fatalf("Decrypt: untyped error %v", err)
		}
		if _, err := k.Rewrap(data); err != nil && !typed(err) {
			t.Fatalf("Rewrap: untyped error %v", err)
		}
		if _, err := CiphertextKeyID(data); err != nil && !typed(err) {
			t.Fatalf("CiphertextKeyID: untyped error %v", err)
		}
		if !bytes.Equal(in, data) {
			t.Fatal("the input was modified")
		}

		ct, err := k.Encrypt(data, aad)
		if err != nil {
			t.Fatal(err)
		}
		got, err := k.Decrypt(ct, aad)
		if err != nil {
			t.Fatalf("Decrypt(Encrypt(x)): %v", err)
		}
		if !bytes.Equal(got, data) {
			t.Fatal("Decrypt(Encrypt(x)) != x")
		}
		rw, err := k.Rewrap(ct)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := k.Decrypt(rw, aad); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Decrypt(Rewrap(Encrypt(x))): %v", err)
		}
	})
}

// FuzzParseKeyMaterial feeds arbitrary bytes to the root-key file parser,
// the base64 key parser and the keyring.json header parser: none may panic,
// each failure is its typed error, and a header that parses has Argon2id
// parameters within the bounds unsealing will spend (no header can make an
// unseal allocate without limit).
func FuzzParseKeyMaterial(f *testing.F) {
	key := bytes.Repeat([]byte{7}, KeySize)
	f.Add(key)
	f.Add([]byte("BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n"))
	f.Add([]byte("BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc"))
	f.Add([]byte("-_-_"))
	f.Add([]byte(`{"version":1,"kdf":{"name":"argon2id","version":19,"memory_kib":65536,"time":3,"threads":4,"salt":"AAAAAAAAAAAAAAAAAAAAAA=="},"key_id":"0a0b0c0d","check":"AAAA"}`))
	f.Add([]byte(`{"version":2}`))
	// A real header, with the cheapest parameters the bounds allow.
	path := filepath.Join(f.TempDir(), "keyring.json")
	if _, err := initPassphrase(path, []byte("a passphrase of some length"), rand.Reader,
		Argon2Params{Memory: 8 * 1024, Time: 1, Threads: 1}, false); err != nil {
		f.Fatal(err)
	}
	header, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := parseHeader(header); err != nil {
		f.Fatalf("the header initPassphrase wrote does not parse: %v", err)
	}
	f.Add(header)
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := parseKeyFile(data); err != nil && !errors.Is(err, ErrKeyLength) && !errors.Is(err, ErrKeyEncoding) {
			t.Fatalf("parseKeyFile: untyped error %v", err)
		}
		if _, err := parseKey(data); err != nil && !errors.Is(err, ErrKeyLength) && !errors.Is(err, ErrKeyEncoding) {
			t.Fatalf("parseKey: untyped error %v", err)
		}
		h, err := parseHeader(data)
		if err != nil {
			if !errors.Is(err, ErrHeader) {
				t.Fatalf("parseHeader: untyped error %v", err)
			}
			return
		}
		if err := h.params.validate(); err != nil {
			t.Fatalf("a parsed header has parameters validate refuses: %v", err)
		}
		if len(h.salt) < minSaltSize || len(h.salt) > maxSaltSize {
			t.Fatalf("a parsed header has a %d-byte salt", len(h.salt))
		}
	})
}
