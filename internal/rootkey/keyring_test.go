package rootkey

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"reflect"
	"sync"
	"testing"
)

// newKey returns a fresh root key, destroyed when the test ends.
func newKey(t testing.TB) Key {
	t.Helper()
	k, err := Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Destroy)
	return k
}

// newRing returns a keyring unsealed with root.
func newRing(t testing.TB, root Key) *Keyring {
	t.Helper()
	k, err := New(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if k.Sealed() {
		t.Fatal("a keyring given a root key is sealed")
	}
	return k
}

func mustEncrypt(t testing.TB, k *Keyring, pt, aad []byte) []byte {
	t.Helper()
	ct, err := k.Encrypt(pt, aad)
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

func TestRoundTrip(t *testing.T) {
	root := newKey(t)
	k := newRing(t, root)
	for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 1024, 65537} {
		for _, aad := range [][]byte{nil, []byte("signing-key:k1"), bytes.Repeat([]byte{0xa5}, 300)} {
			pt := make([]byte, n)
			rand.Read(pt)
			ct := mustEncrypt(t, k, pt, aad)
			if len(ct) != n+Overhead {
				t.Errorf("%d bytes: ciphertext is %d bytes, want %d", n, len(ct), n+Overhead)
			}
			if id, err := CiphertextKeyID(ct); err != nil || id != root.ID() {
				t.Errorf("CiphertextKeyID = %v, %v; want %v", id, err, root.ID())
			}
			if n >= 16 && bytes.Contains(ct, pt) {
				t.Errorf("%d bytes: the plaintext appears in the ciphertext", n)
			}
			got, err := k.Decrypt(ct, aad)
			if err != nil {
				t.Fatalf("%d bytes, aad %d bytes: %v", n, len(aad), err)
			}
			if !bytes.Equal(got, pt) {
				t.Fatalf("%d bytes: round trip changed the plaintext", n)
			}
			if cap(got) != len(got) {
				t.Errorf("%d bytes: plaintext has spare capacity %d (scratch space leaks)", n, cap(got))
			}
		}
	}
}

func TestEncryptIsRandomized(t *testing.T) {
	k := newRing(t, newKey(t))
	a := mustEncrypt(t, k, []byte("same"), nil)
	b := mustEncrypt(t, k, []byte("same"), nil)
	if bytes.Equal(a, b) {
		t.Fatal("two encryptions of one plaintext are equal")
	}
	if bytes.Equal(a[offWrapNonce:offWrappedKey], b[offWrapNonce:offWrappedKey]) ||
		bytes.Equal(a[offPayloadNonce:offPayload], b[offPayloadNonce:offPayload]) {
		t.Fatal("a nonce repeated")
	}
}

func TestAADMismatch(t *testing.T) {
	k := newRing(t, newKey(t))
	ct := mustEncrypt(t, k, []byte("private key bytes"), []byte("signing-key:k1"))
	for _, aad := range []string{"signing-key:k2", "signing-key:k1 ", "", "SIGNING-KEY:k1"} {
		if _, err := k.Decrypt(ct, []byte(aad)); !errors.Is(err, ErrDecrypt) {
			t.Errorf("aad %q: %v, want ErrDecrypt", aad, err)
		}
	}
}

// TestTamperEveryByte flips bits in every byte of a ciphertext: each
// variant fails, with the error its field calls for.
func TestTamperEveryByte(t *testing.T) {
	k := newRing(t, newKey(t))
	aad := []byte("ctx")
	ct := mustEncrypt(t, k, []byte("attack at dawn, bring snacks"), aad)
	for i := range ct {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(ct)
			bad[i] ^= mask
			_, err := k.Decrypt(bad, aad)
			var want error
			switch {
			case i == 0:
				want = ErrUnsupportedVersion
			case i < offWrapNonce:
				want = ErrUnknownKey
			default:
				want = ErrDecrypt
			}
			if !errors.Is(err, want) {
				t.Errorf("byte %d ^ %#02x: %v, want %v", i, mask, err, want)
			}
		}
	}
}

func TestTruncatedAndExtended(t *testing.T) {
	k := newRing(t, newKey(t))
	ct := mustEncrypt(t, k, []byte("payload"), nil)
	for n := range len(ct) {
		_, err := k.Decrypt(ct[:n], nil)
		want := ErrDecrypt
		if n < Overhead {
			want = ErrMalformed
		}
		if !errors.Is(err, want) {
			t.Errorf("first %d bytes: %v, want %v", n, err, want)
		}
		if _, err := k.Rewrap(ct[:n]); err == nil && n < Overhead {
			t.Errorf("Rewrap of the first %d bytes succeeded", n)
		}
	}
	if _, err := k.Decrypt(append(bytes.Clone(ct), 0), nil); !errors.Is(err, ErrDecrypt) {
		t.Errorf("an appended byte: %v, want ErrDecrypt", err)
	}
}

func TestUnknownVersion(t *testing.T) {
	k := newRing(t, newKey(t))
	ct := mustEncrypt(t, k, []byte("x"), nil)
	for _, v := range []byte{0, 2, 0x7f, 0xff} {
		bad := bytes.Clone(ct)
		bad[0] = v
		_, err := k.Decrypt(bad, nil)
		var ve *VersionError
		if !errors.As(err, &ve) || ve.Version != v || !errors.Is(err, ErrUnsupportedVersion) {
			t.Errorf("version %d: %v", v, err)
		}
		if _, err := CiphertextKeyID(bad); !errors.Is(err, ErrUnsupportedVersion) {
			t.Errorf("CiphertextKeyID, version %d: %v", v, err)
		}
	}
	// A short input with an unknown version reports the version.
	if _, err := k.Decrypt([]byte{9}, nil); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("[9]: %v", err)
	}
}

func TestUnknownKey(t *testing.T) {
	a, b := newKey(t), newKey(t)
	ct := mustEncrypt(t, newRing(t, a), []byte("x"), nil)
	_, err := newRing(t, b).Decrypt(ct, nil)
	var ue *UnknownKeyError
	if !errors.As(err, &ue) || ue.ID != a.ID() || !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("decrypt under another root key: %v", err)
	}
}

func TestSealed(t *testing.T) {
	k, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !k.Sealed() {
		t.Fatal("a keyring with no key source starts unsealed")
	}
	checkSealed := func(when string) {
		t.Helper()
		_, e1 := k.Encrypt([]byte("x"), nil)
		_, e2 := k.Decrypt(make([]byte, 200), nil)
		_, e3 := k.Rewrap(make([]byte, 200))
		e4 := k.Rotate(newKey(t))
		e5 := k.Retire(1)
		_, e6 := k.Current()
		_, e7 := k.KeyIDs()
		for i, err := range []error{e1, e2, e3, e4, e5, e6, e7} {
			if !errors.Is(err, ErrSealed) {
				t.Errorf("%s: operation %d: %v, want ErrSealed", when, i+1, err)
			}
		}
	}
	checkSealed("new")

	root := newKey(t)
	if err := k.Unseal(root); err != nil {
		t.Fatal(err)
	}
	if err := k.Unseal(newKey(t)); !errors.Is(err, ErrAlreadyUnsealed) {
		t.Errorf("second Unseal: %v, want ErrAlreadyUnsealed", err)
	}
	ct := mustEncrypt(t, k, []byte("kept across seal"), nil)
	k.Seal()
	k.Seal() // idempotent
	if !k.Sealed() {
		t.Fatal("Seal left the keyring unsealed")
	}
	checkSealed("after Seal")
	if err := k.Unseal(root); err != nil {
		t.Fatal(err)
	}
	if pt, err := k.Decrypt(ct, nil); err != nil || string(pt) != "kept across seal" {
		t.Fatalf("after reseal and unseal: %q, %v", pt, err)
	}
	if err := k.Unseal(Key{}); !errors.Is(err, ErrAlreadyUnsealed) {
		t.Errorf("Unseal(zero) on an unsealed keyring: %v", err)
	}
	k.Seal()
	if err := k.Unseal(Key{}); !errors.Is(err, ErrNoKey) {
		t.Errorf("Unseal(zero): %v, want ErrNoKey", err)
	}
	if err := k.Unseal(root, root); !errors.Is(err, ErrKeyExists) {
		t.Errorf("Unseal(root, root): %v, want ErrKeyExists", err)
	}
	if !k.Sealed() {
		t.Error("a failed Unseal unsealed the keyring")
	}
}

// TestUnsealCopiesKey: the keyring keeps working after the caller
// destroys the key it was unsealed with.
func TestUnsealCopiesKey(t *testing.T) {
	root := newKey(t)
	k := newRing(t, root)
	ct := mustEncrypt(t, k, []byte("x"), nil)
	root.Destroy()
	if !root.IsZero() || root.ID() != 0 {
		t.Error("a destroyed key still holds a key")
	}
	if _, err := k.Decrypt(ct, nil); err != nil {
		t.Fatal(err)
	}
	if err := k.Rotate(root); !errors.Is(err, ErrNoKey) {
		t.Errorf("Rotate(destroyed): %v, want ErrNoKey", err)
	}
}

func TestRotateRewrapRetire(t *testing.T) {
	r1, r2 := newKey(t), newKey(t)
	k := newRing(t, r1)
	aad := []byte("signing-key:k1")
	old := mustEncrypt(t, k, []byte("under r1"), aad)

	if err := k.Rotate(r2); err != nil {
		t.Fatal(err)
	}
	if id, _ := k.Current(); id != r2.ID() {
		t.Fatalf("Current = %v after Rotate, want %v", id, r2.ID())
	}
	if ids, _ := k.KeyIDs(); fmt.Sprint(ids) != fmt.Sprint([]KeyID{r2.ID(), r1.ID()}) {
		t.Errorf("KeyIDs = %v", ids)
	}
	if err := k.Rotate(r1); !errors.Is(err, ErrKeyExists) {
		t.Errorf("Rotate to a key already held: %v", err)
	}
	newer := mustEncrypt(t, k, []byte("under r2"), aad)
	if id, _ := CiphertextKeyID(newer); id != r2.ID() {
		t.Errorf("new ciphertext under %v, want %v", id, r2.ID())
	}
	if pt, err := k.Decrypt(old, aad); err != nil || string(pt) != "under r1" {
		t.Fatalf("old ciphertext after Rotate: %q, %v", pt, err)
	}

	rw, err := k.Rewrap(old)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := CiphertextKeyID(rw); id != r2.ID() {
		t.Errorf("rewrapped ciphertext under %v, want %v", id, r2.ID())
	}
	if !bytes.Equal(rw[offPayloadNonce:], old[offPayloadNonce:]) {
		t.Error("Rewrap changed the payload")
	}
	if bytes.Equal(rw[offWrapNonce:offWrappedKey], old[offWrapNonce:offWrappedKey]) {
		t.Error("Rewrap reused the wrap nonce")
	}
	if pt, err := k.Decrypt(rw, aad); err != nil || string(pt) != "under r1" {
		t.Fatalf("rewrapped: %q, %v", pt, err)
	}
	// Rewrapping a ciphertext already under the current key is harmless.
	if rw2, err := k.Rewrap(rw); err != nil {
		t.Fatal(err)
	} else if pt, err := k.Decrypt(rw2, aad); err != nil || string(pt) != "under r1" {
		t.Fatalf("rewrapped twice: %q, %v", pt, err)
	}
	// A damaged wrapped key is caught by Rewrap.
	bad := bytes.Clone(old)
	bad[offWrappedKey] ^= 1
	if _, err := k.Rewrap(bad); !errors.Is(err, ErrDecrypt) {
		t.Errorf("Rewrap of a damaged wrapped key: %v", err)
	}

	// A restarted node unseals with the current key and the previous one.
	k2, _ := New(Options{})
	if err := k2.Unseal(r2, r1); err != nil {
		t.Fatal(err)
	}
	for _, ct := range [][]byte{old, newer, rw} {
		if _, err := k2.Decrypt(ct, aad); err != nil {
			t.Errorf("Unseal(r2, r1): %v", err)
		}
	}
	if id, _ := k2.Current(); id != r2.ID() {
		t.Errorf("Unseal(r2, r1): current %v", id)
	}

	if err := k.Retire(r2.ID()); !errors.Is(err, ErrCurrentKey) {
		t.Errorf("Retire(current): %v", err)
	}
	if err := k.Retire(12345); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("Retire(unknown): %v", err)
	}
	if err := k.Retire(r1.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Decrypt(old, aad); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("old ciphertext after Retire: %v, want ErrUnknownKey", err)
	}
	if _, err := k.Rewrap(old); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("Rewrap after Retire: %v, want ErrUnknownKey", err)
	}
	if _, err := k.Decrypt(rw, aad); err != nil {
		t.Errorf("rewrapped ciphertext after Retire: %v", err)
	}
}

func TestRootKeyOpaque(t *testing.T) {
	if reflect.TypeFor[Key]().Comparable() {
		t.Error("Key is comparable with ==")
	}
	raw := bytes.Repeat([]byte{0xab}, KeySize)
	k, err := NewRootKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	raw[0] = 0 // NewRootKey copied
	k2, _ := NewRootKey(bytes.Repeat([]byte{0xab}, KeySize))
	if !k.Equal(k2) || k.ID() != k2.ID() {
		t.Error("NewRootKey did not copy its input")
	}
	if k.Equal(newKey(t)) || k.Equal(Key{}) || (Key{}).Equal(Key{}) {
		t.Error("Equal holds for different keys")
	}
	want := "Key(" + k.ID().String() + ")"
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q", "%T", "%p", "%s%d"} {
		s := fmt.Sprintf(verb, k) + fmt.Sprintf(verb, []Key{k}) + fmt.Sprintf(verb, struct{ K Key }{k})
		if bytes.Contains([]byte(s), []byte("abab")) || bytes.Contains([]byte(s), []byte("ABAB")) ||
			bytes.Contains([]byte(s), []byte("171 171")) || bytes.Contains([]byte(s), []byte(`\xab`)) {
			t.Errorf("%s prints key material: %s", verb, s)
		}
	}
	if got := fmt.Sprint(k); got != want {
		t.Errorf("Sprint = %q, want %q", got, want)
	}
	if got := k.LogValue().String(); got != want {
		t.Errorf("LogValue = %q", got)
	}
	for _, n := range []int{0, 16, 31, 33} {
		if _, err := NewRootKey(make([]byte, n)); !errors.Is(err, ErrKeyLength) {
			t.Errorf("NewRootKey(%d bytes): %v", n, err)
		}
	}
	k.Destroy()
	if !k2.Equal(k2) || k.Equal(k2) || fmt.Sprint(k) != "Key(none)" {
		t.Error("Destroy")
	}
}

func TestRandomSource(t *testing.T) {
	root := newKey(t)
	// The same random stream gives the same ciphertext: every random byte
	// comes from Options.Rand.
	enc := func() []byte {
		k, err := New(Options{Root: root, Rand: mrand.NewChaCha8([32]byte{1})})
		if err != nil {
			t.Fatal(err)
		}
		return mustEncrypt(t, k, []byte("deterministic"), nil)
	}
	if a, b := enc(), enc(); !bytes.Equal(a, b) {
		t.Error("the injected random source is not the only one used")
	}
	// A failing source fails the operation cleanly.
	boom := errors.New("entropy exhausted")
	k, _ := New(Options{Root: root, Rand: failReader{boom}})
	if _, err := k.Encrypt([]byte("x"), nil); !errors.Is(err, boom) {
		t.Errorf("Encrypt with a failing source: %v", err)
	}
	ct := mustEncrypt(t, newRing(t, root), []byte("x"), nil)
	if _, err := k.Rewrap(ct); !errors.Is(err, boom) {
		t.Errorf("Rewrap with a failing source: %v", err)
	}
	if _, err := Generate(failReader{boom}); !errors.Is(err, boom) {
		t.Errorf("Generate with a failing source: %v", err)
	}
}

type failReader struct{ err error }

func (r failReader) Read([]byte) (int, error) { return 0, r.err }

// TestConcurrent runs Encrypt, Decrypt, Rewrap, Rotate and Retire at once;
// run it with -race.
func TestConcurrent(t *testing.T) {
	r1 := newKey(t)
	k := newRing(t, r1)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			aad := fmt.Appendf(nil, "record:%d", g)
			for i := range 200 {
				pt := fmt.Appendf(nil, "secret %d/%d", g, i)
				ct, err := k.Encrypt(pt, aad)
				if err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					if ct, err = k.Rewrap(ct); err != nil {
						t.Error(err)
						return
					}
				}
				got, err := k.Decrypt(ct, aad)
				if err != nil || !bytes.Equal(got, pt) {
					t.Errorf("goroutine %d, %d: %q, %v", g, i, got, err)
					return
				}
			}
		})
	}
	// Rotations run alongside; old keys are kept, so nothing may fail.
	wg.Go(func() {
		for range 20 {
			if err := k.Rotate(newKey(t)); err != nil {
				t.Error(err)
			}
			k.Current()
			k.KeyIDs()
		}
	})
	wg.Wait()
	if ids, _ := k.KeyIDs(); len(ids) != 21 {
		t.Errorf("%d keys after 20 rotations", len(ids))
	}
}

// TestSealDuringUse: Seal while other goroutines encrypt; each operation
// either succeeds or returns ErrSealed.
func TestSealDuringUse(t *testing.T) {
	root := newKey(t)
	k := newRing(t, root)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 300 {
				ct, err := k.Encrypt([]byte("x"), nil)
				if err != nil {
					if !errors.Is(err, ErrSealed) {
						t.Error(err)
					}
					continue
				}
				if _, err := k.Decrypt(ct, nil); err != nil && !errors.Is(err, ErrSealed) {
					t.Error(err)
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			k.Seal()
			if err := k.Unseal(root); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
}

func TestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	k := newRing(t, newKey(t))
	pt, aad := make([]byte, 1024), []byte("signing-key:k1")
	ct := mustEncrypt(t, k, pt, aad)
	// One buffer for the result, plus crypto/aes's key schedule and
	// cipher.NewGCM's wrapper for the data key.
	const budget = 3
	if n := testing.AllocsPerRun(200, func() { k.Encrypt(pt, aad) }); n > budget {
		t.Errorf("Encrypt allocates %v times, want at most %d", n, budget)
	}
	if n := testing.AllocsPerRun(200, func() { k.Decrypt(ct, aad) }); n > budget {
		t.Errorf("Decrypt allocates %v times, want at most %d", n, budget)
	}
	if n := testing.AllocsPerRun(200, func() { k.Rewrap(ct) }); n > 1 {
		t.Errorf("Rewrap allocates %v times, want at most 1", n)
	}
	k.Seal()
	if n := testing.AllocsPerRun(200, func() { k.Decrypt(ct, aad) }); n != 0 {
		t.Errorf("Decrypt on a sealed keyring allocates %v times", n)
	}
}
