package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// testTenantRekeyState: a tenant's rotation state is absent, then stored
// once, replaced only at the revision read, listed with the others, kept
// apart from other tenants' and deleted with its tenant.
func testTenantRekeyState(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateTenant", s.CreateTenant(ctx, tenant("acme", t0)))
	must(t, "CreateTenant", s.CreateTenant(ctx, tenant("beta", t0)))
	_, err := s.GetTenantRekey(ctx, "acme")
	wantErr(t, "GetTenantRekey(none)", err, store.ErrNotFound)
	r := store.TenantRekey{Tenant: "acme", ID: "tr1", State: store.TenantRekeyRewrapping, Version: 2, Rate: 10,
		Total: 9, Done: 3, Worker: "kgn_a", LeaseUntil: t0.Add(time.Minute), StartedAt: t0, UpdatedAt: t0.Add(time.Second)}
	wantErr(t, "PutTenantRekey(unknown state)", s.PutTenantRekey(ctx, store.TenantRekey{Tenant: "acme", ID: "x", State: "paused", Version: 2}, 0), store.ErrInvalid)
	wantErr(t, "PutTenantRekey(no version)", s.PutTenantRekey(ctx, store.TenantRekey{Tenant: "acme", ID: "x", State: store.TenantRekeyDone}, 0), store.ErrInvalid)
	wantErr(t, "PutTenantRekey(invalid tenant)", s.PutTenantRekey(ctx, store.TenantRekey{Tenant: "Acme", ID: "x", State: store.TenantRekeyDone, Version: 2}, 0), store.ErrInvalid)
	unknown := r
	unknown.Tenant = "zeta"
	wantErr(t, "PutTenantRekey(unknown tenant)", s.PutTenantRekey(ctx, unknown, 0), store.ErrNotFound)
	wantErr(t, "PutTenantRekey(unknown tenant, revision 1)", s.PutTenantRekey(ctx, unknown, 1), store.ErrNotFound)
	must(t, "PutTenantRekey(new)", s.PutTenantRekey(ctx, r, 0))
	wantErr(t, "PutTenantRekey(new again)", s.PutTenantRekey(ctx, r, 0), store.ErrConflict)
	r.Revision = 1
	sameTenantRekey(t, "after the first put", getTenantRekey(t, s, "acme"), r)

	b := store.TenantRekey{Tenant: "beta", ID: "tr2", State: store.TenantRekeyDone, Version: 3, StartedAt: t0, FinishedAt: t0.Add(time.Hour)}
	must(t, "PutTenantRekey(beta)", s.PutTenantRekey(ctx, b, 0))
	r.Done, r.State, r.Worker, r.LeaseUntil, r.FinishedAt = 9, store.TenantRekeyDone, "", time.Time{}, t0.Add(time.Hour)
	wantErr(t, "PutTenantRekey(stale revision)", s.PutTenantRekey(ctx, r, 5), store.ErrConflict)
	must(t, "PutTenantRekey(revision 1)", s.PutTenantRekey(ctx, r, 1))
	r.Revision = 2
	sameTenantRekey(t, "after the second put", getTenantRekey(t, s, "acme"), r)
	b.Revision = 1
	sameTenantRekey(t, "the other tenant's", getTenantRekey(t, s, "beta"), b)
	list, err := s.ListTenantRekeys(ctx)
	must(t, "ListTenantRekeys", err)
	if len(list) != 2 {
		t.Fatalf("ListTenantRekeys: %d states, want 2", len(list))
	}
	sameTenantRekey(t, "listed first", list[0], r)
	sameTenantRekey(t, "listed second", list[1], b)

	must(t, "DeleteTenant(beta)", s.DeleteTenant(ctx, "beta"))
	_, err = s.GetTenantRekey(ctx, "beta")
	wantErr(t, "GetTenantRekey(deleted tenant)", err, store.ErrNotFound)
	must(t, "CreateTenant(beta again)", s.CreateTenant(ctx, tenant("beta", t0)))
	_, err = s.GetTenantRekey(ctx, "beta")
	wantErr(t, "GetTenantRekey(tenant made again)", err, store.ErrNotFound)
}

func getTenantRekey(t *testing.T, s store.Store, tenant string) store.TenantRekey {
	t.Helper()
	r, err := s.GetTenantRekey(t.Context(), tenant)
	must(t, "GetTenantRekey("+tenant+")", err)
	return r
}

func sameTenantRekey(t *testing.T, what string, got, want store.TenantRekey) {
	t.Helper()
	for i, p := range [][2]time.Time{{got.LeaseUntil, want.LeaseUntil}, {got.StartedAt, want.StartedAt},
		{got.UpdatedAt, want.UpdatedAt}, {got.FinishedAt, want.FinishedAt}} {
		if !p[0].Equal(p[1]) {
			t.Errorf("%s: time %d is %v, want %v", what, i, p[0], p[1])
		}
	}
	got.LeaseUntil, got.StartedAt, got.UpdatedAt, got.FinishedAt = want.LeaseUntil, want.StartedAt, want.UpdatedAt, want.FinishedAt
	same(t, what, got, want)
}

// testTenantSealed: a tenant's sealed records are listed in pages, kind by
// kind (transit key versions, secret metadata, secret versions), each in
// name and version order, none of another tenant's; each is rewrapped only
// while it holds what the rewrapper read, and nothing else of it changes.
func testTenantSealed(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, name := range []string{"acme", "beta"} {
		must(t, "CreateTenant", s.CreateTenant(ctx, tenant(name, t0)))
		createKey(t, s, name, "k2", 2)
		createKey(t, s, name, "k1", 1)
		putSecret(t, s, name, "b/x", 1)
		putSecret(t, s, name, "a", 2)
	}
	var want []store.SealedRecord
	add := func(kind store.SealedKind, name string, version int, sealed string) {
		want = append(want, store.SealedRecord{SealedRef: store.SealedRef{Kind: kind, Name: name, Version: version}, Sealed: []byte(sealed)})
	}
	add(store.SealedTransitVersion, "k1", 1, "sealed:acme/k1/v1")
	add(store.SealedTransitVersion, "k2", 1, "sealed:acme/k2/v1")
	add(store.SealedTransitVersion, "k2", 2, "sealed:acme/k2/v2")
	add(store.SealedSecretMeta, "a", 0, "meta:acme/a@2")
	add(store.SealedSecretMeta, "b/x", 0, "meta:acme/b/x@1")
	add(store.SealedSecretValue, "a", 1, "value:acme/a/v1")
	add(store.SealedSecretValue, "a", 2, "value:acme/a/v2")
	add(store.SealedSecretValue, "b/x", 1, "value:acme/b/x/v1")
	for _, page := range []int{1, 2, 3, 7, 8, store.MaxSealedPage} {
		var got []store.SealedRecord
		var after store.SealedRef
		for calls := 0; ; calls++ {
			recs, err := s.TenantSealed(ctx, "acme", after, page)
			must(t, fmt.Sprintf("TenantSealed(page %d)", page), err)
			if len(recs) > page || calls > len(want) {
				t.Fatalf("page %d: %d records in one call, or no end", page, len(recs))
			}
			got = append(got, recs...)
			if len(recs) < page {
				break
			}
			after = recs[len(recs)-1].SealedRef
		}
		same(t, fmt.Sprintf("records in pages of %d", page), got, want)
	}
	for _, bad := range []struct {
		what   string
		tenant string
		ref    store.SealedRef
		limit  int
	}{
		{"invalid tenant", "Acme", store.SealedRef{}, 10},
		{"limit 0", "acme", store.SealedRef{}, 0},
		{"limit too large", "acme", store.SealedRef{}, store.MaxSealedPage + 1},
		{"unknown kind", "acme", store.SealedRef{Kind: 9}, 10},
	} {
		_, err := s.TenantSealed(ctx, bad.tenant, bad.ref, bad.limit)
		wantErr(t, "TenantSealed("+bad.what+")", err, store.ErrInvalid)
	}
	recs, err := s.TenantSealed(ctx, "zeta", store.SealedRef{}, 10)
	if err != nil || len(recs) != 0 {
		t.Errorf("TenantSealed(unknown tenant) = %d records, %v; want none", len(recs), err)
	}

	// Rewraps: only what was read is replaced; a gone record is ErrNotFound.
	before := getSecret(t, s, "acme", "a")
	for _, rec := range want {
		next := append([]byte("next:"), rec.Sealed...)
		wantErr(t, "RewrapTenantSealed(wrong old) "+rec.Kind.String(), s.RewrapTenantSealed(ctx, "acme", rec.SealedRef, []byte("other"), next), store.ErrConflict)
		wantErr(t, "RewrapTenantSealed(other tenant) "+rec.Kind.String(), s.RewrapTenantSealed(ctx, "beta", rec.SealedRef, rec.Sealed, next), store.ErrConflict)
		must(t, "RewrapTenantSealed "+rec.Kind.String(), s.RewrapTenantSealed(ctx, "acme", rec.SealedRef, rec.Sealed, next))
	}
	gone := store.SealedRef{Kind: store.SealedSecretValue, Name: "a", Version: 9}
	wantErr(t, "RewrapTenantSealed(gone)", s.RewrapTenantSealed(ctx, "acme", gone, []byte("x"), []byte("y")), store.ErrNotFound)
	wantErr(t, "RewrapTenantSealed(empty)", s.RewrapTenantSealed(ctx, "acme", want[0].SealedRef, want[0].Sealed, nil), store.ErrInvalid)
	wantErr(t, "RewrapTenantSealed(no kind)", s.RewrapTenantSealed(ctx, "acme", store.SealedRef{Name: "a"}, []byte("x"), []byte("y")), store.ErrInvalid)
	got, err := s.TenantSealed(ctx, "acme", store.SealedRef{}, store.MaxSealedPage)
	must(t, "TenantSealed after rewraps", err)
	for i := range want {
		want[i].Sealed = append([]byte("next:"), want[i].Sealed...)
	}
	same(t, "records after rewraps", got, want)
	after := getSecret(t, s, "acme", "a")
	if after.Revision != before.Revision || after.CurrentVersion != before.CurrentVersion || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("a rewrap changed the secret's row beyond its sealed bytes: %+v, was %+v", after, before)
	}
	k, vs, err := s.GetTransitKey(ctx, "acme", "k2")
	must(t, "GetTransitKey", err)
	if k.Revision != 2 || string(vs[1].Sealed) != "next:sealed:acme/k2/v2" {
		t.Errorf("transit key after rewraps: revision %d, version 2 %q", k.Revision, vs[1].Sealed)
	}
	other, err := s.TenantSealed(ctx, "beta", store.SealedRef{}, store.MaxSealedPage)
	must(t, "TenantSealed(beta)", err)
	for _, rec := range other {
		if string(rec.Sealed[:5]) == "next:" {
			t.Errorf("the other tenant's %s %s was rewrapped", rec.Kind, rec.Name)
		}
	}

	// Racing rewraps of one record: exactly one wins.
	rec := got[len(got)-1]
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.RewrapTenantSealed(ctx, "acme", rec.SealedRef, rec.Sealed, []byte{'r', byte('0' + i)})
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("racing rewrap %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d racing rewraps won, want 1", won)
	}
}
