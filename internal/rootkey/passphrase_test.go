package rootkey

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// testArgon2 keeps tests fast; TestDefaultArgon2 runs the real defaults
// once.
var testArgon2 = Argon2Params{Memory: 64, Time: 1, Threads: 1}

const testPassphrase = "correct horse battery staple"

// initHeader writes a header with testArgon2 and returns its path and key.
func initHeader(t *testing.T) (string, Key) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keyring.json")
	root, err := initPassphrase(path, []byte(testPassphrase), nil, testArgon2, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(root.Destroy)
	return path, root
}

func TestPassphraseHeader(t *testing.T) {
	path, root := initHeader(t)
	if fi, err := os.Stat(path); err != nil {
		t.Fatal(err)
	} else if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("header mode %04o, want 0600", fi.Mode().Perm())
	}
	h, err := ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	if h.Params() != testArgon2 {
		t.Errorf("Params = %+v, want %+v", h.Params(), testArgon2)
	}
	if h.KeyID() != root.ID() {
		t.Errorf("KeyID = %v, want %v", h.KeyID(), root.ID())
	}
	if len(h.salt) != SaltSize {
		t.Errorf("salt is %d bytes", len(h.salt))
	}
	got, err := h.Derive([]byte(testPassphrase))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(root) {
		t.Error("Derive gave a different key than InitPassphrase")
	}
	for _, wrong := range []string{"correct horse battery stapl", "Correct horse battery staple", testPassphrase + " ", "x"} {
		if _, err := h.Derive([]byte(wrong)); !errors.Is(err, ErrWrongPassphrase) {
			t.Errorf("passphrase %q: %v, want ErrWrongPassphrase", wrong, err)
		}
	}
	if _, err := h.Derive(nil); !errors.Is(err, ErrWrongPassphrase) {
		t.Errorf("empty passphrase: %v", err)
	}
	data, _ := os.ReadFile(path)
	if bytes.Contains(data, []byte(testPassphrase)) {
		t.Error("the header holds the passphrase")
	}
	// It refuses to overwrite.
	if _, err := initPassphrase(path, []byte(testPassphrase), nil, testArgon2, false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second init: %v, want fs.ErrExist", err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, data) {
		t.Error("a refused init changed the header")
	}
	// Another salt gives another key for the same passphrase.
	path2 := filepath.Join(t.TempDir(), "keyring.json")
	other, err := initPassphrase(path2, []byte(testPassphrase), nil, testArgon2, false)
	if err != nil {
		t.Fatal(err)
	}
	if other.Equal(root) {
		t.Error("two headers derive the same key from one passphrase")
	}
}

func TestInitPassphraseRefuses(t *testing.T) {
	dir := t.TempDir()
	if _, err := InitPassphrase(filepath.Join(dir, "a.json"), []byte("short"), nil); !errors.Is(err, ErrWeakPassphrase) {
		t.Errorf("short passphrase: %v", err)
	}
	// The exported path enforces OWASP's floor.
	if _, err := initPassphrase(filepath.Join(dir, "b.json"), []byte(testPassphrase), nil, testArgon2, true); err == nil {
		t.Error("parameters under the minimum accepted")
	}
	if _, err := initPassphrase(filepath.Join(dir, "c.json"), []byte(testPassphrase), failReader{errors.New("no entropy")}, testArgon2, false); err == nil {
		t.Error("a failing random source accepted")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("refused inits left files: %v", entries)
	}
	def := DefaultArgon2()
	if def.Memory < minArgon2.Memory || def.Time < minArgon2.Time || def.Threads < minArgon2.Threads {
		t.Errorf("DefaultArgon2 %+v is under OWASP's minimum %+v", def, minArgon2)
	}
}

func TestUnsealPassphrase(t *testing.T) {
	path, root := initHeader(t)
	ct := mustEncrypt(t, newRing(t, root), []byte("signing key"), []byte("signing-key:k1"))

	k, err := New(Options{HeaderFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if !k.Sealed() {
		t.Fatal("a keyring with only a header starts unsealed")
	}
	if err := k.UnsealPassphrase([]byte("wrong passphrase!!")); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("wrong passphrase: %v", err)
	}
	if !k.Sealed() {
		t.Fatal("a wrong passphrase unsealed the keyring")
	}
	pass := []byte(testPassphrase)
	if err := k.UnsealPassphrase(pass); err != nil {
		t.Fatal(err)
	}
	clear(pass) // the caller may wipe it
	if pt, err := k.Decrypt(ct, []byte("signing-key:k1")); err != nil || string(pt) != "signing key" {
		t.Fatalf("after passphrase unseal: %q, %v", pt, err)
	}
	if err := k.UnsealPassphrase([]byte(testPassphrase)); !errors.Is(err, ErrAlreadyUnsealed) {
		t.Errorf("second unseal: %v", err)
	}

	noHeader, _ := New(Options{})
	if err := noHeader.UnsealPassphrase([]byte(testPassphrase)); !errors.Is(err, ErrNoHeader) {
		t.Errorf("no header configured: %v", err)
	}
	missing, _ := New(Options{HeaderFile: filepath.Join(t.TempDir(), "keyring.json")})
	if err := missing.UnsealPassphrase([]byte(testPassphrase)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing header: %v, want fs.ErrNotExist", err)
	}
}

// TestHeaderTampering edits a valid header field by field.
func TestHeaderTampering(t *testing.T) {
	path, _ := initHeader(t)
	orig, _ := os.ReadFile(path)
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(orig, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	kdf := func(m map[string]any) map[string]any { return m["kdf"].(map[string]any) }
	cases := []struct {
		name string
		data []byte
		want error // from ReadHeader, or from Derive when ReadHeader succeeds
	}{
		{"salt", edit(func(m map[string]any) { kdf(m)["salt"] = "AAAAAAAAAAAAAAAAAAAAAA==" }), ErrWrongPassphrase},
		{"time", edit(func(m map[string]any) { kdf(m)["time"] = 2 }), ErrWrongPassphrase},
		{"memory", edit(func(m map[string]any) { kdf(m)["memory_kib"] = 128 }), ErrWrongPassphrase},
		{"check", edit(func(m map[string]any) {
			c := []byte(m["check"].(string))
			c[20] ^= 1
			m["check"] = string(c)
		}), nil}, // base64 flip: header error or wrong passphrase, either is fine
		{"key_id", edit(func(m map[string]any) { m["key_id"] = "00000000" }), ErrHeader},
		{"version 2", edit(func(m map[string]any) { m["version"] = 2 }), ErrHeader},
		{"no version", edit(func(m map[string]any) { delete(m, "version") }), ErrHeader},
		{"kdf scrypt", edit(func(m map[string]any) { kdf(m)["name"] = "scrypt" }), ErrHeader},
		{"argon2 v16", edit(func(m map[string]any) { kdf(m)["version"] = 16 }), ErrHeader},
		{"unknown field", edit(func(m map[string]any) { m["extra"] = true }), ErrHeader},
		{"threads 0", edit(func(m map[string]any) { kdf(m)["threads"] = 0 }), ErrHeader},
		{"threads 256", edit(func(m map[string]any) { kdf(m)["threads"] = 256 }), ErrHeader},
		{"memory 1 TiB", edit(func(m map[string]any) { kdf(m)["memory_kib"] = 1 << 30 }), ErrHeader},
		{"memory under 8 KiB per lane", edit(func(m map[string]any) { kdf(m)["memory_kib"] = 7 }), ErrHeader},
		{"time 0", edit(func(m map[string]any) { kdf(m)["time"] = 0 }), ErrHeader},
		{"time 1000", edit(func(m map[string]any) { kdf(m)["time"] = 1000 }), ErrHeader},
		{"short salt", edit(func(m map[string]any) { kdf(m)["salt"] = "AAAA" }), ErrHeader},
		{"short check", edit(func(m map[string]any) { m["check"] = "AAAA" }), ErrHeader},
		{"key_id not hex", edit(func(m map[string]any) { m["key_id"] = "xyz" }), ErrHeader},
		{"not JSON", []byte("keyring"), ErrHeader},
		{"trailing data", append(bytes.Clone(orig), []byte(`{"version":1}`)...), ErrHeader},
		{"empty", nil, ErrHeader},
	}
	for _, tc := range cases {
		p := filepath.Join(t.TempDir(), "keyring.json")
		os.WriteFile(p, tc.data, 0o600)
		h, err := ReadHeader(p)
		if err == nil {
			_, err = h.Derive([]byte(testPassphrase))
		}
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
		} else if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// The untouched header still works.
	h, err := ReadHeader(path)
	if err == nil {
		_, err = h.Derive([]byte(testPassphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestDefaultArgon2 runs the real parameters once: InitPassphrase writes
// them, ReadHeader reads them back, and the passphrase unseals.
func TestDefaultArgon2(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: the real Argon2id parameters (64 MiB); run without -short")
	}
	path := filepath.Join(t.TempDir(), "keyring.json")
	root, err := InitPassphrase(path, []byte(testPassphrase), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Destroy()
	h, err := ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	if h.Params() != DefaultArgon2() {
		t.Errorf("header records %+v, want %+v", h.Params(), DefaultArgon2())
	}
	data, _ := os.ReadFile(path)
	for _, field := range []string{`"name": "argon2id"`, `"memory_kib": 65536`, `"time": 3`, `"threads": 4`, `"version": 19`} {
		if !strings.Contains(string(data), field) {
			t.Errorf("header lacks %s:\n%s", field, data)
		}
	}
	k, _ := New(Options{HeaderFile: path})
	if err := k.UnsealPassphrase([]byte(testPassphrase)); err != nil {
		t.Fatal(err)
	}
	if id, _ := k.Current(); id != root.ID() {
		t.Errorf("unsealed with %v, want %v", id, root.ID())
	}
}

// TestHeaderBoundsCost: an edited keyring.json cannot make an unseal
// allocate or compute without limit. Each header below was accepted by
// ReadHeader before the bounds were tightened (a 4 GiB or 1 GiB work area,
// 64 passes, 255 lanes); only ReadHeader runs here, never a derivation, so
// that the test cannot exhaust the machine if the bounds regress.
func TestHeaderBoundsCost(t *testing.T) {
	path, _ := initHeader(t)
	orig, _ := os.ReadFile(path)
	for _, tc := range []struct {
		name    string
		kdf     map[string]any
		refused bool
	}{
		{"memory 4 GiB", map[string]any{"memory_kib": 4 << 20, "time": 1, "threads": 4}, true},
		{"memory 1 GiB", map[string]any{"memory_kib": 1 << 20, "time": 1, "threads": 4}, true},
		{"memory just over the cap", map[string]any{"memory_kib": maxArgon2.Memory + 1, "time": 1, "threads": 4}, true},
		{"64 passes", map[string]any{"memory_kib": 64 * 1024, "time": 64, "threads": 4}, true},
		{"255 lanes", map[string]any{"memory_kib": 64 * 1024, "time": 3, "threads": 255}, true},
		{"the caps themselves", map[string]any{"memory_kib": maxArgon2.Memory, "time": maxArgon2.Time, "threads": maxArgon2.Threads}, false},
		{"the defaults", map[string]any{"memory_kib": 64 * 1024, "time": 3, "threads": 4}, false},
	} {
		var m map[string]any
		if err := json.Unmarshal(orig, &m); err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.kdf {
			m["kdf"].(map[string]any)[k] = v
		}
		data, _ := json.Marshal(m)
		_, err := parseHeader(data)
		if tc.refused && !errors.Is(err, ErrHeader) {
			t.Errorf("%s: %v, want ErrHeader", tc.name, err)
		}
		if !tc.refused && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if d := DefaultArgon2(); d.validate() != nil || d.Memory > maxArgon2.Memory/2 {
		t.Errorf("DefaultArgon2 %+v is not well inside the caps %+v", d, maxArgon2)
	}
}

// withKeyID rewrites the key_id of the header at path, as someone who
// found a key with a colliding 32-bit ID (about 2³² HMACs) would present
// it; editing the header simulates the search.
func withKeyID(t *testing.T, path string, id KeyID) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m["key_id"] = id.String()
	data, _ = json.Marshal(m)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestUnsealKeyChecksHeader: with a keyring header configured, a root key
// given as such (not derived from the passphrase) unseals only if it
// authenticates against the header's key-check value; its 32-bit ID alone
// is not enough. Before the fix, Unseal never read the header, so a key
// whose ID matched (here: any key, once key_id is edited) unsealed.
func TestUnsealKeyChecksHeader(t *testing.T) {
	path, root := initHeader(t)
	wrong := newKey(t)
	withKeyID(t, path, wrong.ID()) // the wrong key now "matches" by ID

	k, err := New(Options{HeaderFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Unseal(wrong); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("a key with the header's ID but not its check value: %v, want ErrWrongKey", err)
	}
	if !k.Sealed() {
		t.Fatal("a key that fails the check value unsealed the keyring")
	}
	if _, err := New(Options{Root: wrong, HeaderFile: path}); !errors.Is(err, ErrWrongKey) {
		t.Errorf("New with a key that fails the header's check value: %v, want ErrWrongKey", err)
	}
	// The right key passes the check value; the edited ID then gives the
	// tampering away.
	if err := k.Unseal(root); !errors.Is(err, ErrHeader) || !k.Sealed() {
		t.Errorf("the right key under an edited key_id: %v, sealed=%v; want ErrHeader", err, k.Sealed())
	}
	withKeyID(t, path, root.ID())
	if err := k.Unseal(wrong); !errors.Is(err, ErrWrongKey) || !k.Sealed() {
		t.Errorf("a key with another ID: %v, sealed=%v; want ErrWrongKey", err, k.Sealed())
	}
	if err := k.Unseal(Key{}); !errors.Is(err, ErrNoKey) || !k.Sealed() {
		t.Errorf("no key: %v", err)
	}
	if err := k.Unseal(root); err != nil {
		t.Fatalf("the right key: %v", err)
	}
	if id, _ := k.Current(); id != root.ID() {
		t.Errorf("unsealed with %v, want %v", id, root.ID())
	}
	// Without a header nothing is checked: that is Unseal's contract for
	// keys from the operator's own configuration.
	if _, err := New(Options{Root: wrong}); err != nil {
		t.Errorf("no header: %v", err)
	}
}

// TestUnsealVerified: a verified unseal shows the key to the Verifier in a
// keyring of its own and installs it only if the Verifier accepts it;
// while the Verifier runs, and after it refuses, the keyring is sealed. A
// key that fails the header's check value never reaches the Verifier.
func TestUnsealVerified(t *testing.T) {
	path, root := initHeader(t)
	stored := mustEncrypt(t, newRing(t, root), []byte("signing key"), []byte("k1"))
	k, err := New(Options{HeaderFile: path})
	if err != nil {
		t.Fatal(err)
	}
	opensFor := func(k *Keyring) Verifier {
		return func(c *Keyring) error {
			if !k.Sealed() {
				t.Error("the keyring is unsealed while the Verifier runs")
			}
			if _, err := k.Encrypt([]byte("x"), nil); !errors.Is(err, ErrSealed) {
				t.Errorf("Encrypt while the Verifier runs: %v, want ErrSealed", err)
			}
			_, err := c.Decrypt(stored, []byte("k1"))
			return err
		}
	}
	opens := opensFor(k)
	called := false
	if err := k.UnsealVerified(newKey(t), func(*Keyring) error { called = true; return nil }); !errors.Is(err, ErrWrongKey) || called {
		t.Errorf("a key failing the check value: %v, Verifier called %v", err, called)
	}
	var kept *Keyring
	refuse := errors.New("refused")
	if err := k.UnsealVerified(root, func(c *Keyring) error { kept = c; return refuse }); !errors.Is(err, refuse) || !k.Sealed() {
		t.Fatalf("a refused key: %v, sealed=%v", err, k.Sealed())
	}
	if _, err := kept.Encrypt([]byte("x"), nil); !errors.Is(err, ErrSealed) {
		t.Errorf("the candidate keyring outlived its Verifier: %v", err)
	}
	if err := k.UnsealPassphraseVerified([]byte(testPassphrase), func(*Keyring) error { return refuse }); !errors.Is(err, refuse) || !k.Sealed() {
		t.Fatalf("a refused passphrase: %v, sealed=%v", err, k.Sealed())
	}
	if err := k.UnsealPassphraseVerified([]byte("not the passphrase"), func(*Keyring) error { called = true; return nil }); !errors.Is(err, ErrWrongPassphrase) || called {
		t.Errorf("a wrong passphrase: %v, Verifier called %v", err, called)
	}
	if err := k.UnsealVerified(root, opens); err != nil {
		t.Fatal(err)
	}
	if pt, err := k.Decrypt(stored, []byte("k1")); err != nil || string(pt) != "signing key" {
		t.Fatalf("after a verified unseal: %q, %v", pt, err)
	}
	if err := k.UnsealVerified(root, opens); !errors.Is(err, ErrAlreadyUnsealed) {
		t.Errorf("on an unsealed keyring: %v", err)
	}
	k.Seal()
	if err := k.UnsealPassphraseVerified([]byte(testPassphrase), opens); err != nil {
		t.Fatal(err)
	}
	// Without a header, the Verifier alone decides.
	bare, _ := New(Options{})
	if err := bare.UnsealVerified(newKey(t), opensFor(bare)); !errors.Is(err, ErrUnknownKey) || !bare.Sealed() {
		t.Errorf("no header, a key that does not open the ciphertext: %v", err)
	}
	if err := bare.UnsealVerified(root, opensFor(bare)); err != nil || bare.Sealed() {
		t.Errorf("no header, the right key: %v", err)
	}
}
