package keystore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/transit"
)

// TestBackupRestore: a key with trimmed, retired and current versions is
// backed up on one node and restored on another, under its name or a new
// one, in its tenant or another; a fresh node reads every version back.
// On PostgreSQL too when DATABASE_URL is set.
func TestBackupRestore(t *testing.T) {
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqlite", true: "postgres"}[pg], func(t *testing.T) {
			svcs := fleet(t, 2, pg, Options{})
			a, b := svcs[0], svcs[1]
			const tn = store.DefaultTenant
			if err := nodeOf(a).Store().CreateTenant(ctx, store.Tenant{Name: "acme", CreatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := a.Create(ctx, tn, "src", transit.CreateOptions{Exportable: true, AllowPlaintextBackup: true}); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := a.Rotate(ctx, tn, "src", ""); err != nil {
					t.Fatal(err)
				}
			}
			three := 3
			if _, _, err := a.Configure(ctx, tn, "src", transit.ConfigUpdate{MinDecryptionVersion: &three, MinEncryptionVersion: &three}); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Trim(ctx, tn, "src", 2); err != nil {
				t.Fatal(err)
			}
			backup, err := fleet2(t, a).Backup(ctx, tn, "src") // a fresh node: it opens the retired version for the backup
			if err != nil {
				t.Fatal(err)
			}
			src, err := transit.ParseBackup(backup.Reveal())
			if err != nil {
				t.Fatal(err)
			}
			if n := len(src.Versions()); n != 3 {
				t.Fatalf("the backup holds %d versions, want 3 (2 to 4)", n)
			}
			tests := []struct {
				name, tenant, as string
				force            bool
				want             error
			}{
				{"over the key, without force", tn, "src", false, ErrRestoreExists},
				{"over the key, with force", tn, "src", true, nil},
				{"under a new name", tn, "copy", false, nil},
				{"again under that name", tn, "copy", false, ErrRestoreExists},
				{"in another tenant", "acme", "src", false, nil},
				{"an invalid name", tn, "-bad", false, ErrInvalidName},
			}
			for _, tt := range tests {
				k, err := src.Renamed(tt.as)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := b.Restore(ctx, tt.tenant, k, tt.force); !errors.Is(err, tt.want) {
					t.Fatalf("%s: %v, want %v", tt.name, err, tt.want)
				}
				if tt.want != nil {
					continue
				}
				got, err := fleet2(t, a).Get(ctx, tt.tenant, tt.as)
				if err != nil {
					t.Fatalf("%s: read back: %v", tt.name, err)
				}
				want := src.Config()
				want.Name = tt.as
				if got.Config() != want {
					t.Errorf("%s: config %+v, want %+v", tt.name, got.Config(), want)
				}
				if _, err := b.st.GetTransitKeyVersion(ctx, tt.tenant, tt.as, 2); err != nil {
					t.Errorf("%s: retired version 2 not stored: %v", tt.name, err)
				}
			}
		})
	}
}

func TestBackupRefused(t *testing.T) {
	s := fleet(t, 1, false, Options{})[0]
	const tn = store.DefaultTenant
	if _, _, err := s.Create(ctx, tn, "plain", transit.CreateOptions{Exportable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backup(ctx, tn, "plain"); transit.ReasonOf(err) != transit.ReasonNotExportable {
		t.Errorf("backup without allow_plaintext_backup: %v", err)
	}
	if _, err := s.Backup(ctx, tn, "missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("backup of a missing key: %v", err)
	}
}

// failingStore fails every restore, as a store whose transaction failed
// (the store's own suite shows such a restore writes nothing).
type failingStore struct{ Store }

var errInjected = errors.New("injected failure")

func (f *failingStore) RestoreTransitKey(context.Context, store.TransitKey, []store.TransitKeyVersion) error {
	return errInjected
}

// TestRestoreUndone: a restore the store fails leaves no key on any node,
// and the caller gets the store's error.
func TestRestoreUndone(t *testing.T) {
	a := fleet(t, 1, false, Options{})[0]
	const tn = store.DefaultTenant
	if _, _, err := a.Create(ctx, tn, "src", transit.CreateOptions{Exportable: true, AllowPlaintextBackup: true}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := a.Rotate(ctx, tn, "src", ""); err != nil {
			t.Fatal(err)
		}
	}
	backup, err := a.Backup(ctx, tn, "src")
	if err != nil {
		t.Fatal(err)
	}
	k, err := transit.ParseBackup(backup.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	k, err = k.Renamed("copy")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(&failingStore{Store: a.st}, a.keys, a.n, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Restore(ctx, tn, k, false); !errors.Is(err, errInjected) {
		t.Fatalf("restore: %v, want the injected failure", err)
	}
	if _, err := fleet2(t, a).Get(ctx, tn, "copy"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after a failed restore the key is there: %v", err)
	}
}
