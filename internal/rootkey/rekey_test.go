package rootkey

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func mustKey(t *testing.T) Key {
	t.Helper()
	k, err := Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustRing(t *testing.T, root Key) *Keyring {
	t.Helper()
	k, err := New(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestWrapKey: a root key sealed under another opens to the same key, only
// with its associated data and only under the key that sealed it.
func TestWrapKey(t *testing.T) {
	oldKey, newKey := mustKey(t), mustKey(t)
	ring := mustRing(t, oldKey)
	ct, err := ring.WrapKey(newKey, []byte("rekey:1"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ring.UnwrapKey(ct, []byte("rekey:1"))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(newKey) {
		t.Fatalf("unwrapped %v, want %v", got, newKey)
	}
	if _, err := ring.UnwrapKey(ct, []byte("rekey:2")); !errors.Is(err, ErrDecrypt) {
		t.Errorf("other aad: %v, want ErrDecrypt", err)
	}
	if _, err := mustRing(t, newKey).UnwrapKey(ct, []byte("rekey:1")); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("another root: %v, want ErrUnknownKey", err)
	}
	if _, err := ring.WrapKey(Key{}, nil); !errors.Is(err, ErrNoKey) {
		t.Errorf("WrapKey(zero): %v, want ErrNoKey", err)
	}
}

// TestAccept: an accepted key opens what it sealed without becoming the
// key new ciphertexts use.
func TestAccept(t *testing.T) {
	oldKey, newKey := mustKey(t), mustKey(t)
	ct, err := mustRing(t, oldKey).Encrypt([]byte("payload"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ring := mustRing(t, newKey)
	if _, err := ring.Decrypt(ct, nil); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("before Accept: %v", err)
	}
	for range 2 { // twice: the second changes nothing
		if err := ring.Accept(oldKey); err != nil {
			t.Fatal(err)
		}
	}
	if pt, err := ring.Decrypt(ct, nil); err != nil || string(pt) != "payload" {
		t.Fatalf("after Accept: %q, %v", pt, err)
	}
	if cur, _ := ring.Current(); cur != newKey.ID() {
		t.Errorf("current %v, want %v", cur, newKey.ID())
	}
	if ids, _ := ring.KeyIDs(); len(ids) != 2 {
		t.Errorf("KeyIDs %v, want two", ids)
	}
	ring.Seal()
	if err := ring.Accept(oldKey); !errors.Is(err, ErrSealed) {
		t.Errorf("Accept on a sealed keyring: %v", err)
	}
}

// TestVerifierInstallsWhatItAccepted: a verifier that adds a key to the
// candidate (a rotation under way) has that key installed too; one that
// refuses leaves the keyring sealed.
func TestVerifierInstallsWhatItAccepted(t *testing.T) {
	oldKey, newKey := mustKey(t), mustKey(t)
	ct, err := mustRing(t, oldKey).Encrypt([]byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	refuse := errors.New("no")
	if err := ring.UnsealVerified(newKey, func(c *Keyring) error { c.Accept(oldKey); return refuse }); !errors.Is(err, refuse) {
		t.Fatalf("refused: %v", err)
	}
	if !ring.Sealed() {
		t.Fatal("a refused key was installed")
	}
	if err := ring.UnsealVerified(newKey, func(c *Keyring) error { return c.Accept(oldKey) }); err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Decrypt(ct, nil); err != nil {
		t.Errorf("the accepted key was not installed: %v", err)
	}
	if cur, _ := ring.Current(); cur != newKey.ID() {
		t.Errorf("current %v, want the unsealing key %v", cur, newKey.ID())
	}
}

// TestReplaceHeader: a new passphrase's header replaces the old one whole;
// only the new passphrase unseals afterwards; a damaged header is refused
// and leaves the old one.
func TestReplaceHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyring.json")
	oldPass, newPass := []byte("correct horse battery"), []byte("another long passphrase")
	if _, err := initPassphrase(path, oldPass, nil, testArgon2, false); err != nil {
		t.Fatal(err)
	}
	newKey, data, err := newHeader(newPass, nil, testArgon2, false)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	if err := ReplaceHeader(path, []byte(`{"version":1}`)); !errors.Is(err, ErrHeader) {
		t.Fatalf("damaged header: %v, want ErrHeader", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("a refused header changed the file")
	}
	if err := ReplaceHeader(path, data); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	ring, err := New(Options{HeaderFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := ring.UnsealPassphrase(oldPass); !errors.Is(err, ErrWrongPassphrase) {
		t.Errorf("old passphrase: %v, want ErrWrongPassphrase", err)
	}
	if err := ring.UnsealPassphrase(newPass); err != nil {
		t.Fatalf("new passphrase: %v", err)
	}
	if cur, _ := ring.Current(); cur != newKey.ID() {
		t.Errorf("current %v, want %v", cur, newKey.ID())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("files left beside the header: %v", entries)
	}
}

// TestCheckHeader: a header passes only for the keyring's current key.
func TestCheckHeader(t *testing.T) {
	k, data, err := newHeader([]byte("correct horse battery"), nil, testArgon2, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := mustRing(t, k).CheckHeader(data); err != nil {
		t.Errorf("the key's own header: %v", err)
	}
	if err := mustRing(t, mustKey(t)).CheckHeader(data); !errors.Is(err, ErrWrongKey) {
		t.Errorf("another key: %v, want ErrWrongKey", err)
	}
	if err := mustRing(t, k).CheckHeader([]byte(`{"version":1}`)); !errors.Is(err, ErrHeader) {
		t.Errorf("a damaged header: %v, want ErrHeader", err)
	}
	sealed, _ := New(Options{})
	if err := sealed.CheckHeader(data); !errors.Is(err, ErrSealed) {
		t.Errorf("a sealed keyring: %v, want ErrSealed", err)
	}
}
