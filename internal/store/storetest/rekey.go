package storetest

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// testRekeyState: the rotation's state is absent, then stored once,
// replaced only at the revision read, and read back whole.
func testRekeyState(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.GetRekey(ctx)
	wantErr(t, "GetRekey(empty)", err, store.ErrNotFound)
	r := store.Rekey{ID: "rk1", State: store.RekeyRewrapping, OldKeyID: "0a0b0c0d", NewKeyID: "01020304",
		NewByOld: []byte{1, 2, 3}, OldByNew: []byte{4, 5}, Header: []byte(`{"v":1}`), Rate: 50, Total: 7,
		Worker: "kgn_a", LeaseUntil: t0.Add(time.Minute), StartedAt: t0, UpdatedAt: t0.Add(time.Second)}
	wantErr(t, "PutRekey(unknown state)", s.PutRekey(ctx, store.Rekey{ID: "x", State: "paused"}, 0), store.ErrInvalid)
	must(t, "PutRekey(new)", s.PutRekey(ctx, r, 0))
	wantErr(t, "PutRekey(new again)", s.PutRekey(ctx, r, 0), store.ErrConflict)
	got, err := s.GetRekey(ctx)
	must(t, "GetRekey", err)
	r.Revision = 1
	sameRekey(t, "after the first put", got, r)

	r.Done, r.State, r.NewByOld, r.OldByNew, r.Header, r.FinishedAt = 7, store.RekeyDone, nil, nil, nil, t0.Add(time.Hour)
	wantErr(t, "PutRekey(stale revision)", s.PutRekey(ctx, r, 5), store.ErrConflict)
	must(t, "PutRekey(revision 1)", s.PutRekey(ctx, r, 1))
	got, err = s.GetRekey(ctx)
	must(t, "GetRekey", err)
	r.Revision = 2
	sameRekey(t, "after the second put", got, r)
	wantErr(t, "PutRekey(revision 1 again)", s.PutRekey(ctx, r, 1), store.ErrConflict)
}

func sameRekey(t *testing.T, what string, got, want store.Rekey) {
	t.Helper()
	times := func(r store.Rekey) []time.Time {
		return []time.Time{r.LeaseUntil, r.StartedAt, r.UpdatedAt, r.FinishedAt}
	}
	gt, wt := times(got), times(want)
	for i := range gt {
		if !gt[i].Equal(wt[i]) {
			t.Errorf("%s: time %d is %v, want %v", what, i, gt[i], wt[i])
		}
	}
	got.LeaseUntil, got.StartedAt, got.UpdatedAt, got.FinishedAt = want.LeaseUntil, want.StartedAt, want.UpdatedAt, want.FinishedAt
	same(t, what, got, want)
}

// testRekeyRewrap: a sealed signing key or data key is replaced only while
// it is still the one the rewrapper read, and nothing else of its row
// changes; of two racing rewraps of one record, one wins.
func testRekeyRewrap(t *testing.T, s store.Store) {
	ctx := t.Context()
	k := signingKey("k1", t0)
	must(t, "PutSigningKey", s.PutSigningKey(ctx, k))
	wantErr(t, "RewrapSigningKey(wrong old)", s.RewrapSigningKey(ctx, "k1", []byte("other"), []byte("next")), store.ErrConflict)
	wantErr(t, "RewrapSigningKey(unknown)", s.RewrapSigningKey(ctx, "nope", k.Sealed, []byte("next")), store.ErrNotFound)
	wantErr(t, "RewrapSigningKey(empty)", s.RewrapSigningKey(ctx, "k1", k.Sealed, nil), store.ErrInvalid)
	must(t, "RewrapSigningKey", s.RewrapSigningKey(ctx, "k1", k.Sealed, []byte("next")))
	list, err := s.ListSigningKeys(ctx)
	must(t, "ListSigningKeys", err)
	k.Sealed = []byte("next")
	same(t, "signing key after a rewrap", list, []store.SigningKey{k})

	must(t, "CreateTenant", s.CreateTenant(ctx, tenant("acme", t0)))
	wantErr(t, "RewrapTenantDataKey(no key yet)", s.RewrapTenantDataKey(ctx, "acme", []byte("a"), []byte("b")), store.ErrConflict)
	must(t, "SetTenantDataKey", s.SetTenantDataKey(ctx, "acme", []byte("dk0")))
	wantErr(t, "RewrapTenantDataKey(unknown)", s.RewrapTenantDataKey(ctx, "zeta", []byte("dk0"), []byte("dk1")), store.ErrNotFound)
	wantErr(t, "RewrapTenantDataKey(invalid name)", s.RewrapTenantDataKey(ctx, "Acme", []byte("dk0"), []byte("dk1")), store.ErrInvalid)

	// Racing rewraps of the same sealed key: exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.RewrapTenantDataKey(ctx, "acme", []byte("dk0"), []byte{'n', byte('0' + i)})
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("rewraps %d and %d both won", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("rewrap %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no rewrap won")
	}
	if got := getTenant(t, s, "acme"); !bytes.Equal(got.DataKey, []byte{'n', byte('0' + won)}) {
		t.Errorf("data key %q, want the winner's", got.DataKey)
	}
}
