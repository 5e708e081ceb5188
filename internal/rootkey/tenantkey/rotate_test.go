package tenantkey

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
)

// TestRotate: a rotation makes a new version current at once for what is
// sealed under a fresh read of the row, while every older version still
// opens what it sealed, at this node and at another holding the key from
// before; retiring the older versions makes what they sealed unopenable
// and survives a restart.
func TestRotate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keygate.db")
	st := openStore(t, path)
	root := keyring(t, newRootKey(t))
	keys := New(Config{Store: st, Root: root})
	other := New(Config{Store: st, Root: root}) // another node of the fleet
	createTenant(t, st, "acme")
	k1, err := keys.Get(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	old, err := other.Get(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	ad := []byte("row")
	v1, _ := k1.Seal([]byte("one"), ad)

	k2, err := keys.Rotate(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if k2.Version() != 2 || !slices.Equal(k2.Versions(), []uint32{1, 2}) {
		t.Fatalf("after a rotation: version %d of %v, want 2 of [1 2]", k2.Version(), k2.Versions())
	}
	if held, _ := keys.Get(ctx, "acme"); held != k2 {
		t.Error("the rotating node does not hold the rotated key")
	}
	v2, err := k2.Seal([]byte("two"), ad)
	if err != nil || v2[0] != versionedFormat || len(v2) != len("two")+overhead2 {
		t.Fatalf("Seal under version 2: % x, %v", v2, err)
	}
	if v, ok := SealedVersion(v2); !ok || v != 2 {
		t.Errorf("SealedVersion(v2) = %d, %v", v, ok)
	}
	for _, c := range []struct {
		what   string
		k      *Key
		sealed []byte
		want   string
	}{{"v1 under the rotated key", k2, v1, "one"}, {"v2 under the rotated key", k2, v2, "two"}, {"v1 under the key from before", old, v1, "one"}} {
		if pt, err := c.k.Open(c.sealed, ad); err != nil || string(pt) != c.want {
			t.Errorf("%s: %q, %v", c.what, pt, err)
		}
	}
	if _, err := old.Open(v2, ad); !errors.Is(err, ErrOpen) {
		t.Errorf("v2 under the key from before: %v, want ErrOpen (the caller tries Fresh)", err)
	}
	fresh, err := other.Fresh(ctx, "acme")
	if err != nil || fresh.Version() != 2 {
		t.Fatalf("the other node's fresh key: %v, %v", fresh, err)
	}
	if pt, err := fresh.Open(v2, ad); err != nil || string(pt) != "two" {
		t.Errorf("v2 under the other node's fresh key: %q, %v", pt, err)
	}
	// The version byte is authenticated: changed, the value does not open.
	bad := bytes.Clone(v2)
	bad[4] = 1
	if _, err := k2.Open(bad, ad); !errors.Is(err, ErrOpen) {
		t.Errorf("a value with its version changed: %v, want ErrOpen", err)
	}

	if _, err := keys.Retire(ctx, "acme", 3); !errors.Is(err, ErrRetireCurrent) {
		t.Errorf("Retire(above the current version): %v, want ErrRetireCurrent", err)
	}
	k3, err := keys.Retire(ctx, "acme", 2)
	if err != nil || !slices.Equal(k3.Versions(), []uint32{2}) || k3.Version() != 2 {
		t.Fatalf("Retire(2): %v, %v", k3, err)
	}
	if again, err := keys.Retire(ctx, "acme", 2); err != nil || !slices.Equal(again.Versions(), []uint32{2}) {
		t.Errorf("Retire(2) again: %v, %v; want nothing to do", again, err)
	}
	if _, err := k3.Open(v1, ad); !errors.Is(err, ErrOpen) {
		t.Errorf("v1 after its version was retired: %v, want ErrOpen", err)
	}
	restarted := New(Config{Store: openStore(t, path), Root: root})
	k4, err := restarted.Get(ctx, "acme")
	if err != nil || !slices.Equal(k4.Versions(), []uint32{2}) {
		t.Fatalf("after a restart: %v, %v", k4, err)
	}
	if pt, err := k4.Open(v2, ad); err != nil || string(pt) != "two" {
		t.Errorf("v2 after a restart: %q, %v", pt, err)
	}
	// The ring is stored sealed: no version's key is in the row.
	tn, _ := st.GetTenant(ctx, "acme")
	if len(tn.DataKey) != rootkey.Overhead+5+36 {
		t.Errorf("the sealed ring is %d bytes, want %d", len(tn.DataKey), rootkey.Overhead+5+36)
	}
}

// TestRotateLimits: a tenant with no key yet gets one and then its
// rotation; a ring holds at most MaxVersions versions; the default tenant
// rotates as any other; a sealed root key or an unknown tenant is refused.
func TestRotateLimits(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "keygate.db"))
	root := keyring(t, newRootKey(t))
	keys := New(Config{Store: st, Root: root})
	createTenant(t, st, "acme")
	k, err := keys.Rotate(ctx, "acme")
	if err != nil || k.Version() != 2 {
		t.Fatalf("Rotate(a tenant with no key yet): %v, %v", k, err)
	}
	for i := 3; i <= MaxVersions; i++ {
		if k, err = keys.Rotate(ctx, "acme"); err != nil || k.Version() != uint32(i) {
			t.Fatalf("rotation to %d: %v, %v", i, k, err)
		}
	}
	if _, err := keys.Rotate(ctx, "acme"); !errors.Is(err, ErrTooManyVersions) {
		t.Fatalf("a rotation beyond %d versions: %v", MaxVersions, err)
	}
	if k, err = keys.Retire(ctx, "acme", MaxVersions); err != nil || len(k.Versions()) != 1 {
		t.Fatalf("Retire: %v, %v", k, err)
	}
	if k, err = keys.Rotate(ctx, "acme"); err != nil || k.Version() != MaxVersions+1 {
		t.Fatalf("a rotation after retiring: %v, %v", k, err)
	}
	if k, err = keys.Rotate(ctx, store.DefaultTenant); err != nil || k.Version() != 2 {
		t.Fatalf("Rotate(default tenant): %v, %v", k, err)
	}
	if _, err := keys.Rotate(ctx, "zeta"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Rotate(unknown tenant): %v, want ErrNotFound", err)
	}
	root.Seal()
	if _, err := keys.Rotate(ctx, "acme"); !errors.Is(err, rootkey.ErrSealed) {
		t.Errorf("Rotate while sealed: %v, want ErrSealed", err)
	}
}

// TestRotateRace: rotations racing at two nodes each add a version; none
// is lost and the ring ends with all of them.
func TestRotateRace(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "keygate.db"))
	root := keyring(t, newRootKey(t))
	createTenant(t, st, "acme")
	nodes := []*Keys{New(Config{Store: st, Root: root}), New(Config{Store: st, Root: root})}
	if _, err := nodes[0].Get(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = nodes[i%2].Rotate(ctx, "acme")
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("rotation %d: %v", i, err)
		}
	}
	k, err := New(Config{Store: st, Root: root}).Get(ctx, "acme")
	if err != nil || !slices.Equal(k.Versions(), []uint32{1, 2, 3, 4, 5}) || k.Version() != 5 {
		t.Fatalf("after four racing rotations: %v of %v, %v", k.Version(), k.Versions(), err)
	}
}

// TestSealedVersion reads the version of what Seal returned, and refuses
// what is not a sealed value.
func TestSealedVersion(t *testing.T) {
	v1 := append([]byte{keyFormat}, make([]byte, overhead1-1)...)
	v7 := append([]byte{versionedFormat, 0, 0, 0, 7}, make([]byte, overhead2-5)...)
	v0 := append([]byte{versionedFormat, 0, 0, 0, 0}, make([]byte, overhead2-5)...)
	for _, c := range []struct {
		name   string
		sealed []byte
		want   uint32
		ok     bool
	}{
		{"format 1", v1, 1, true},
		{"format 2", v7, 7, true},
		{"version 0", v0, 0, false},
		{"format 1, short", v1[:overhead1-1], 0, false},
		{"format 2, short", v7[:overhead2-1], 0, false},
		{"unknown format", append([]byte{9}, v7[1:]...), 0, false},
		{"empty", nil, 0, false},
	} {
		if v, ok := SealedVersion(c.sealed); v != c.want || ok != c.ok {
			t.Errorf("%s: %d, %v; want %d, %v", c.name, v, ok, c.want, c.ok)
		}
	}
}

// FuzzParseRing: whatever a tenant's data key opens to, reading it as a
// ring is an error or a ring that encodes to what was read (a bare key
// for version 1 alone).
func FuzzParseRing(f *testing.F) {
	key := make([]byte, rootkey.KeySize)
	rand.Read(key)
	f.Add(key)
	two := ring{current: 2, versions: []uint32{1, 2}, keys: [][]byte{key, key}}
	f.Add(two.encode())
	f.Add(append([]byte{ringFormat, 0, 0, 0, 9}, two.encode()[5:]...))
	f.Add([]byte{ringFormat})
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := parseRing(raw)
		if err != nil {
			if !errors.Is(err, ErrRing) {
				t.Fatalf("error %v does not wrap ErrRing", err)
			}
			return
		}
		if len(r.versions) == 0 || len(r.versions) > MaxVersions || !slices.Contains(r.versions, r.current) {
			t.Fatalf("parsed ring %v with current %d", r.versions, r.current)
		}
		if got := r.encode(); !bytes.Equal(got, raw) && !(len(r.versions) == 1 && r.versions[0] == 1) {
			t.Fatal(fmt.Sprintf("encode(parse(raw)) differs: % x", got))
		}
	})
}
