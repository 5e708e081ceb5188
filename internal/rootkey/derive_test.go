package rootkey

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"testing"
)

// DeriveKey is RFC 5869 HKDF-SHA256 of the root key with the fixed salt
// and the label as info: checked against crypto/hkdf given the raw key.
func TestDeriveKey(t *testing.T) {
	raw := bytes.Repeat([]byte{0x42}, KeySize)
	root, err := NewRootKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	k := newRing(t, root)
	root.Destroy()

	got := make([]byte, 32)
	if err := k.DeriveKey("keygate audit checkpoint v1", got); err != nil {
		t.Fatal(err)
	}
	want, err := hkdf.Key(sha256.New, raw, []byte("keygate keyring derive v1"), "keygate audit checkpoint v1", 32)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("DeriveKey = %x, want %x", got, want)
	}
	other := make([]byte, 32)
	if err := k.DeriveKey("keygate audit hmac v1", other); err != nil || bytes.Equal(other, got) {
		t.Errorf("another label derived the same key (%v)", err)
	}

	// The same root key elsewhere derives the same key.
	again, _ := NewRootKey(raw)
	k2 := newRing(t, again)
	same := make([]byte, 32)
	if err := k2.DeriveKey("keygate audit checkpoint v1", same); err != nil || !bytes.Equal(same, got) {
		t.Errorf("another keyring with the same root key derived %x (%v)", same, err)
	}

	for _, c := range []struct {
		label string
		n     int
	}{{"", 32}, {"x", 0}, {"x", MaxDerivedSize + 1}} {
		if err := k.DeriveKey(c.label, make([]byte, c.n)); err == nil {
			t.Errorf("DeriveKey(%q, %d bytes) succeeded", c.label, c.n)
		}
	}
	k.Seal()
	if err := k.DeriveKey("keygate audit checkpoint v1", got); !errors.Is(err, ErrSealed) {
		t.Errorf("DeriveKey sealed: %v, want ErrSealed", err)
	}
}
