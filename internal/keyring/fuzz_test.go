package keyring

import (
	"bytes"
	"errors"
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
