package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// transitKey is a new key of tenant, with its first version, created at
// created.
func transitKey(tenant, name string, created time.Time) (store.TransitKey, store.TransitKeyVersion) {
	return store.TransitKey{
			Tenant:    tenant,
			Name:      name,
			Type:      "aes256-gcm96",
			Config:    []byte(`{"exportable":false,"min_decryption_version":1}`),
			CreatedAt: created,
			UpdatedAt: created,
		},
		keyVersion(tenant, name, 1, created)
}

func keyVersion(tenant, name string, version int, created time.Time) store.TransitKeyVersion {
	return store.TransitKeyVersion{Tenant: tenant, Name: name, Version: version,
		Sealed: fmt.Appendf(nil, "sealed:%s/%s/v%d", tenant, name, version), CreatedAt: created}
}

// createKey creates a key with versions 1 to n, a second apart from t0,
// and returns it as stored and its versions.
func createKey(t *testing.T, s store.Store, tenant, name string, n int) (store.TransitKey, []store.TransitKeyVersion) {
	t.Helper()
	ctx := t.Context()
	k, first := transitKey(tenant, name, t0)
	must(t, "CreateTransitKey("+name+")", s.CreateTransitKey(ctx, k, first))
	vs := []store.TransitKeyVersion{first}
	for v := 2; v <= n; v++ {
		next := keyVersion(tenant, name, v, t0.Add(time.Duration(v-1)*time.Second))
		must(t, fmt.Sprintf("AddTransitKeyVersion(%s v%d)", name, v), s.AddTransitKeyVersion(ctx, next))
		vs = append(vs, next)
	}
	k.Latest, k.MinAvailable, k.Revision = n, 1, int64(n)
	k.UpdatedAt = vs[n-1].CreatedAt
	return k, vs
}

// getKey returns the key and its versions, failing t on an error.
func getKey(t *testing.T, s store.Store, tenant, name string) (store.TransitKey, []store.TransitKeyVersion) {
	t.Helper()
	k, vs, err := s.GetTransitKey(t.Context(), tenant, name)
	if err != nil {
		t.Fatalf("GetTransitKey(%s, %s): %v", tenant, name, err)
	}
	return k, vs
}

// sameKey checks the key tenant/name and its versions as GetTransitKey
// returns them.
func sameKey(t *testing.T, s store.Store, what string, k store.TransitKey, vs []store.TransitKeyVersion) {
	t.Helper()
	gk, gvs := getKey(t, s, k.Tenant, k.Name)
	same(t, what+": key", gk, k)
	same(t, what+": versions", gvs, vs)
}

func testTransitRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	k, first := transitKey(store.DefaultTenant, "orders", t0)
	// CreateTransitKey sets Latest, MinAvailable and Revision, and puts
	// the first version in the key's tenant and name.
	in := k
	in.Latest, in.Revision = 7, 42
	stray := first
	stray.Tenant, stray.Name = "other", "other"
	must(t, "CreateTransitKey", s.CreateTransitKey(ctx, in, stray))
	want := k
	want.Latest, want.MinAvailable, want.Revision = 1, 1, 1
	sameKey(t, s, "GetTransitKey", want, []store.TransitKeyVersion{first})
	v, err := s.GetTransitKeyVersion(ctx, store.DefaultTenant, "orders", 1)
	must(t, "GetTransitKeyVersion", err)
	same(t, "GetTransitKeyVersion", v, first)

	// An imported key starts at the version given; with no Config.
	imp, v5 := transitKey(store.DefaultTenant, "imported", t0.Add(time.Hour))
	imp.Config, imp.Type = nil, "ed25519"
	v5.Version = 5
	must(t, "CreateTransitKey(imported at v5)", s.CreateTransitKey(ctx, imp, v5))
	imp.Latest, imp.MinAvailable, imp.Revision = 5, 1, 1
	sameKey(t, s, "imported key", imp, []store.TransitKeyVersion{v5})
	// Or with a MinAvailable of its own.
	min3, v3 := transitKey(store.DefaultTenant, "min3", t0)
	min3.MinAvailable, v3.Version = 3, 3
	must(t, "CreateTransitKey(min 3, at v3)", s.CreateTransitKey(ctx, min3, v3))
	min3.Latest, min3.Revision = 3, 1
	sameKey(t, s, "key with MinAvailable 3", min3, []store.TransitKeyVersion{v3})

	for _, name := range []string{"b", "A", "a-1"} {
		k, first := transitKey(store.DefaultTenant, name, t0)
		must(t, "CreateTransitKey("+name+")", s.CreateTransitKey(ctx, k, first))
	}
	names, err := s.ListTransitKeys(ctx, store.DefaultTenant)
	must(t, "ListTransitKeys", err)
	same(t, "ListTransitKeys (sorted)", names, []string{"A", "a-1", "b", "imported", "min3", "orders"})
}

func testTransitNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	createKey(t, s, store.DefaultTenant, "k", 2)
	const tn = store.DefaultTenant
	_, _, err := s.GetTransitKey(ctx, tn, "nope")
	wantErr(t, "GetTransitKey(nope)", err, store.ErrNotFound)
	_, err = s.GetTransitKeyVersion(ctx, tn, "nope", 1)
	wantErr(t, "GetTransitKeyVersion(nope)", err, store.ErrNotFound)
	for _, v := range []int{0, 3, -1} {
		_, err = s.GetTransitKeyVersion(ctx, tn, "k", v)
		wantErr(t, fmt.Sprintf("GetTransitKeyVersion(k, %d)", v), err, store.ErrNotFound)
	}
	nope, _ := transitKey(tn, "nope", t0)
	nope.Revision = 1
	wantErrNaming(t, "UpdateTransitKey(nope)", s.UpdateTransitKey(ctx, nope), store.ErrNotFound, "nope")
	wantErrNaming(t, "AddTransitKeyVersion(nope)", s.AddTransitKeyVersion(ctx, keyVersion(tn, "nope", 2, t0)), store.ErrNotFound, "nope")
	wantErrNaming(t, "TrimTransitKey(nope)", s.TrimTransitKey(ctx, tn, "nope", 1), store.ErrNotFound, "nope")
	wantErr(t, "DeleteTransitKey(nope)", s.DeleteTransitKey(ctx, tn, "nope", 1), store.ErrNotFound)
	k, first := transitKey("nope", "k", t0)
	wantErrNaming(t, "CreateTransitKey(tenant nope)", s.CreateTransitKey(ctx, k, first), store.ErrNotFound, "nope")
	names, err := s.ListTransitKeys(ctx, "nope")
	must(t, "ListTransitKeys(tenant nope)", err)
	if len(names) != 0 {
		t.Errorf("ListTransitKeys(tenant nope) = %v", names)
	}
}

func testTransitConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	k, vs := createKey(t, s, store.DefaultTenant, "k", 2)
	again, first := transitKey(store.DefaultTenant, "k", t0.Add(time.Hour))
	again.Type = "rsa-2048"
	wantErr(t, "CreateTransitKey(k again)", s.CreateTransitKey(ctx, again, first), store.ErrConflict)
	sameKey(t, s, "k after the conflict", k, vs)
}

// testTransitInvalid: arguments no backend stores are ErrInvalid, and
// change nothing.
func testTransitInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	k, vs := createKey(t, s, store.DefaultTenant, "k", 3)
	mk := func(f func(*store.TransitKey, *store.TransitKeyVersion)) func() error {
		return func() error {
			nk, first := transitKey(store.DefaultTenant, "new", t0)
			f(&nk, &first)
			return s.CreateTransitKey(ctx, nk, first)
		}
	}
	for _, c := range []call{
		{"CreateTransitKey(no name)", mk(func(k *store.TransitKey, _ *store.TransitKeyVersion) { k.Name = "" })},
		{"CreateTransitKey(no type)", mk(func(k *store.TransitKey, _ *store.TransitKeyVersion) { k.Type = "" })},
		{"CreateTransitKey(version 0)", mk(func(_ *store.TransitKey, v *store.TransitKeyVersion) { v.Version = 0 })},
		{"CreateTransitKey(no key material)", mk(func(_ *store.TransitKey, v *store.TransitKeyVersion) { v.Sealed = nil })},
		{"CreateTransitKey(MinAvailable above the version)", mk(func(k *store.TransitKey, _ *store.TransitKeyVersion) { k.MinAvailable = 2 })},
		{"CreateTransitKey(MinAvailable below 1)", mk(func(k *store.TransitKey, _ *store.TransitKeyVersion) { k.MinAvailable = -1 })},
		{"AddTransitKeyVersion(version 0)", func() error {
			return s.AddTransitKeyVersion(ctx, keyVersion(store.DefaultTenant, "k", 0, t0))
		}},
		{"AddTransitKeyVersion(no key material)", func() error {
			v := keyVersion(store.DefaultTenant, "k", 4, t0)
			v.Sealed = []byte{}
			return s.AddTransitKeyVersion(ctx, v)
		}},
		{"TrimTransitKey(above the latest)", func() error { return s.TrimTransitKey(ctx, store.DefaultTenant, "k", 4) }},
		{"GetTransitKey(no name)", func() error { _, _, err := s.GetTransitKey(ctx, store.DefaultTenant, ""); return err }},
	} {
		wantErr(t, c.name, c.f(), store.ErrInvalid)
	}
	must(t, "TrimTransitKey(2)", s.TrimTransitKey(ctx, store.DefaultTenant, "k", 2))
	k.MinAvailable, k.Revision = 2, k.Revision+1
	wantErr(t, "TrimTransitKey(below the minimum)", s.TrimTransitKey(ctx, store.DefaultTenant, "k", 1), store.ErrInvalid)
	sameKey(t, s, "k after invalid calls", k, vs[1:])
	names, err := s.ListTransitKeys(ctx, store.DefaultTenant)
	must(t, "ListTransitKeys", err)
	same(t, "ListTransitKeys", names, []string{"k"})
}

// testTransitUpdate: UpdateTransitKey replaces Config and UpdatedAt, only
// from the stored revision, and counts the revision up.
func testTransitUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	k, vs := createKey(t, s, store.DefaultTenant, "k", 2)
	other, otherVs := createKey(t, s, store.DefaultTenant, "other", 1)
	upd := k
	upd.Config, upd.UpdatedAt = []byte(`{"deletion_allowed":true}`), t0.Add(time.Hour)
	// Only Config and UpdatedAt change; the rest is ignored.
	in := upd
	in.Type, in.Latest, in.MinAvailable, in.CreatedAt = "rsa-4096", 9, 9, t0.Add(99*time.Hour)
	must(t, "UpdateTransitKey", s.UpdateTransitKey(ctx, in))
	upd.Revision++
	sameKey(t, s, "k after the update", upd, vs)

	stale := in // its Revision is the one before the update
	stale.Config = []byte(`{"stale":true}`)
	wantErrNaming(t, "UpdateTransitKey(stale revision)", s.UpdateTransitKey(ctx, stale), store.ErrConflict, "k")
	sameKey(t, s, "k after the stale update", upd, vs)
	sameKey(t, s, "another key", other, otherVs)

	// Rotations and trims count as changes too.
	must(t, "AddTransitKeyVersion", s.AddTransitKeyVersion(ctx, keyVersion(store.DefaultTenant, "k", 3, t0)))
	wantErr(t, "UpdateTransitKey(from before the rotation)", s.UpdateTransitKey(ctx, upd), store.ErrConflict)
	must(t, "TrimTransitKey", s.TrimTransitKey(ctx, store.DefaultTenant, "k", 2))
	upd.Revision += 2
	must(t, "UpdateTransitKey(from the current revision)", s.UpdateTransitKey(ctx, upd))
}

// testTransitRotate: AddTransitKeyVersion adds the version after the
// latest, and nothing else.
func testTransitRotate(t *testing.T, s store.Store) {
	ctx := t.Context()
	k, vs := createKey(t, s, store.DefaultTenant, "k", 1)
	for v := 2; v <= 3; v++ {
		next := keyVersion(store.DefaultTenant, "k", v, t0.Add(time.Duration(v)*time.Minute))
		must(t, fmt.Sprintf("AddTransitKeyVersion(v%d)", v), s.AddTransitKeyVersion(ctx, next))
		vs = append(vs, next)
		k.Latest, k.Revision, k.UpdatedAt = v, k.Revision+1, next.CreatedAt
		sameKey(t, s, fmt.Sprintf("k at v%d", v), k, vs)
		got, err := s.GetTransitKeyVersion(ctx, store.DefaultTenant, "k", v)
		must(t, "GetTransitKeyVersion", err)
		same(t, "GetTransitKeyVersion", got, next)
	}
	for _, v := range []int{1, 2, 3, 5} {
		late := keyVersion(store.DefaultTenant, "k", v, t0.Add(time.Hour))
		late.Sealed = []byte("late")
		wantErrNaming(t, fmt.Sprintf("AddTransitKeyVersion(v%d after v3)", v), s.AddTransitKeyVersion(ctx, late), store.ErrConflict, "k")
	}
	sameKey(t, s, "k after refused rotations", k, vs)
	_, err := s.GetTransitKeyVersion(ctx, store.DefaultTenant, "k", 5)
	wantErr(t, "GetTransitKeyVersion(5)", err, store.ErrNotFound)
}

// testTransitRotateConcurrent: of 20 nodes adding version 2 at once,
// exactly one does; the others get ErrConflict and write nothing.
func testTransitRotateConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	k, vs := createKey(t, s, store.DefaultTenant, "k", 1)
	tries := make([]store.TransitKeyVersion, 20)
	for i := range tries {
		tries[i] = keyVersion(store.DefaultTenant, "k", 2, t0.Add(time.Duration(i)*time.Second))
		tries[i].Sealed = fmt.Appendf(nil, "node %d", i)
	}
	winner := oneWinner(t, race(len(tries), func(i int) error { return s.AddTransitKeyVersion(ctx, tries[i]) }), store.ErrConflict)
	k.Latest, k.Revision, k.UpdatedAt = 2, 2, tries[winner].CreatedAt
	sameKey(t, s, "k after the race", k, append(vs, tries[winner]))
}

// testTransitUpdateConcurrent: of 20 nodes updating the key from one
// revision at once, exactly one does.
func testTransitUpdateConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	k, vs := createKey(t, s, store.DefaultTenant, "k", 1)
	tries := make([]store.TransitKey, 20)
	for i := range tries {
		tries[i] = k
		tries[i].Config = fmt.Appendf(nil, `{"node":%d}`, i)
	}
	winner := oneWinner(t, race(len(tries), func(i int) error { return s.UpdateTransitKey(ctx, tries[i]) }), store.ErrConflict)
	k.Config, k.Revision = tries[winner].Config, 2
	sameKey(t, s, "k after the race", k, vs)
}

// testTransitTrim: TrimTransitKey deletes the versions below the new
// minimum, keeps the rest, and leaves the key rotating on.
func testTransitTrim(t *testing.T, s store.Store) {
	ctx := t.Context()
	k, vs := createKey(t, s, store.DefaultTenant, "k", 5)
	other, otherVs := createKey(t, s, store.DefaultTenant, "other", 3)
	must(t, "TrimTransitKey(3)", s.TrimTransitKey(ctx, store.DefaultTenant, "k", 3))
	k.MinAvailable, k.Revision = 3, k.Revision+1
	sameKey(t, s, "k from 3", k, vs[2:])
	for _, v := range []int{1, 2} {
		_, err := s.GetTransitKeyVersion(ctx, store.DefaultTenant, "k", v)
		wantErr(t, fmt.Sprintf("GetTransitKeyVersion(trimmed v%d)", v), err, store.ErrNotFound)
	}
	must(t, "TrimTransitKey(3 again)", s.TrimTransitKey(ctx, store.DefaultTenant, "k", 3))
	must(t, "TrimTransitKey(5, the latest)", s.TrimTransitKey(ctx, store.DefaultTenant, "k", 5))
	k.MinAvailable, k.Revision = 5, k.Revision+2
	sameKey(t, s, "k from 5", k, vs[4:])
	next := keyVersion(store.DefaultTenant, "k", 6, t0.Add(time.Hour))
	must(t, "AddTransitKeyVersion(v6)", s.AddTransitKeyVersion(ctx, next))
	k.Latest, k.Revision, k.UpdatedAt = 6, k.Revision+1, next.CreatedAt
	sameKey(t, s, "k after a rotation", k, append(vs[4:], next))
	sameKey(t, s, "another key", other, otherVs)
}

func testTransitDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	k3, vs3 := createKey(t, s, store.DefaultTenant, "k", 3)
	other, otherVs := createKey(t, s, store.DefaultTenant, "other", 2)
	// Only at the revision stored: a key changed since it was read is
	// not deleted.
	for _, rev := range []int64{k3.Revision - 1, k3.Revision + 1, 0} {
		wantErrNaming(t, fmt.Sprintf("DeleteTransitKey(revision %d of %d)", rev, k3.Revision),
			s.DeleteTransitKey(ctx, store.DefaultTenant, "k", rev), store.ErrConflict, "k")
	}
	sameKey(t, s, "k after deletions at other revisions", k3, vs3)
	must(t, "DeleteTransitKey", s.DeleteTransitKey(ctx, store.DefaultTenant, "k", k3.Revision))
	_, _, err := s.GetTransitKey(ctx, store.DefaultTenant, "k")
	wantErr(t, "GetTransitKey after delete", err, store.ErrNotFound)
	for v := 1; v <= 3; v++ {
		_, err = s.GetTransitKeyVersion(ctx, store.DefaultTenant, "k", v)
		wantErr(t, fmt.Sprintf("GetTransitKeyVersion(v%d) after delete", v), err, store.ErrNotFound)
	}
	wantErr(t, "DeleteTransitKey again", s.DeleteTransitKey(ctx, store.DefaultTenant, "k", k3.Revision), store.ErrNotFound)
	names, err := s.ListTransitKeys(ctx, store.DefaultTenant)
	must(t, "ListTransitKeys", err)
	same(t, "ListTransitKeys after delete", names, []string{"other"})
	sameKey(t, s, "another key", other, otherVs)
	// The name starts afresh, at version 1.
	k, vs := createKey(t, s, store.DefaultTenant, "k", 1)
	sameKey(t, s, "k again", k, vs)
}

// testTransitTenants: a key of one tenant is invisible, and untouchable,
// under another tenant's name; the same name in two tenants is two keys;
// a tenant with keys is not deleted.
func testTransitTenants(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateTenant(acme)", s.CreateTenant(ctx, tenant("acme", t0)))
	must(t, "CreateTenant(beta)", s.CreateTenant(ctx, tenant("beta", t0)))
	ak, avs := createKey(t, s, "acme", "shared", 3)
	createKey(t, s, store.DefaultTenant, "shared", 1)
	createKey(t, s, "acme", "acme-only", 1)

	_, _, err := s.GetTransitKey(ctx, "beta", "shared")
	wantErr(t, "GetTransitKey(beta, shared)", err, store.ErrNotFound)
	_, err = s.GetTransitKeyVersion(ctx, store.DefaultTenant, "shared", 3)
	wantErr(t, "GetTransitKeyVersion(default, shared, 3)", err, store.ErrNotFound)
	_, err = s.GetTransitKeyVersion(ctx, store.DefaultTenant, "acme-only", 1)
	wantErr(t, "GetTransitKeyVersion(default, acme-only, 1)", err, store.ErrNotFound)
	for tn, want := range map[string][]string{"acme": {"acme-only", "shared"}, store.DefaultTenant: {"shared"}, "beta": nil} {
		names, err := s.ListTransitKeys(ctx, tn)
		must(t, "ListTransitKeys("+tn+")", err)
		same(t, "ListTransitKeys("+tn+")", names, want)
	}
	beta := ak
	beta.Tenant = "beta"
	wantErr(t, "UpdateTransitKey(beta, shared)", s.UpdateTransitKey(ctx, beta), store.ErrNotFound)
	wantErr(t, "AddTransitKeyVersion(beta, shared)", s.AddTransitKeyVersion(ctx, keyVersion("beta", "shared", 4, t0)), store.ErrNotFound)
	wantErr(t, "TrimTransitKey(beta, shared)", s.TrimTransitKey(ctx, "beta", "shared", 2), store.ErrNotFound)
	wantErr(t, "DeleteTransitKey(beta, shared)", s.DeleteTransitKey(ctx, "beta", "shared", ak.Revision), store.ErrNotFound)
	// The default tenant's key of the same name moves on its own.
	must(t, "AddTransitKeyVersion(default, shared, 2)", s.AddTransitKeyVersion(ctx, keyVersion(store.DefaultTenant, "shared", 2, t0)))
	must(t, "TrimTransitKey(default, shared, 2)", s.TrimTransitKey(ctx, store.DefaultTenant, "shared", 2))
	must(t, "DeleteTransitKey(default, shared)", s.DeleteTransitKey(ctx, store.DefaultTenant, "shared", 3))
	sameKey(t, s, "acme's key", ak, avs)

	wantErrNaming(t, "DeleteTenant(acme, with keys)", s.DeleteTenant(ctx, "acme"), store.ErrNotEmpty, "acme")
	sameKey(t, s, "acme's key after the refused delete", ak, avs)
	must(t, "DeleteTransitKey(acme, shared)", s.DeleteTransitKey(ctx, "acme", "shared", ak.Revision))
	must(t, "DeleteTransitKey(acme, acme-only)", s.DeleteTransitKey(ctx, "acme", "acme-only", 1))
	must(t, "DeleteTenant(acme, empty)", s.DeleteTenant(ctx, "acme"))
}

// transitCalls are the transit calls that take a tenant name, each with
// name, for the tests of tenant names and of cancellation.
func transitCalls(ctx context.Context, s store.Store, tenant string) []call {
	k, first := transitKey(tenant, "k", t0)
	k.Revision = 1
	return []call{
		{"CreateTransitKey", func() error { return s.CreateTransitKey(ctx, k, first) }},
		{"GetTransitKey", func() error { _, _, err := s.GetTransitKey(ctx, tenant, "k"); return err }},
		{"GetTransitKeyVersion", func() error { _, err := s.GetTransitKeyVersion(ctx, tenant, "k", 1); return err }},
		{"ListTransitKeys", func() error { _, err := s.ListTransitKeys(ctx, tenant); return err }},
		{"UpdateTransitKey", func() error { return s.UpdateTransitKey(ctx, k) }},
		{"AddTransitKeyVersion", func() error { return s.AddTransitKeyVersion(ctx, keyVersion(tenant, "k", 2, t0)) }},
		{"TrimTransitKey", func() error { return s.TrimTransitKey(ctx, tenant, "k", 1) }},
		{"DeleteTransitKey", func() error { return s.DeleteTransitKey(ctx, tenant, "k", 1) }},
	}
}

// testTransitRestore: a restored key arrives with all its versions at
// once, MinAvailable its first and Latest its last; a taken name, an
// unknown tenant or versions out of order write nothing.
func testTransitRestore(t *testing.T, s store.Store) {
	ctx := t.Context()
	k, v3 := transitKey(store.DefaultTenant, "restored", t0)
	var vs []store.TransitKeyVersion
	for i := range 3 {
		v := v3
		v.Version, v.Sealed, v.CreatedAt = 3+i, []byte{byte('a' + i)}, t0.Add(time.Duration(i)*time.Hour)
		vs = append(vs, v)
	}
	must(t, "RestoreTransitKey", s.RestoreTransitKey(ctx, k, vs))
	want := k
	want.Latest, want.MinAvailable, want.Revision = 5, 3, 1
	sameKey(t, s, "restored key", want, vs)

	other := vs[:1]
	wantErr(t, "RestoreTransitKey(taken name)", s.RestoreTransitKey(ctx, k, other), store.ErrConflict)
	sameKey(t, s, "restored key after a refused restore", want, vs)
	nk := k
	nk.Tenant = "nowhere"
	wantErr(t, "RestoreTransitKey(unknown tenant)", s.RestoreTransitKey(ctx, nk, vs), store.ErrNotFound)
	gap := k
	gap.Name = "gap"
	wantErr(t, "RestoreTransitKey(a gap)", s.RestoreTransitKey(ctx, gap, []store.TransitKeyVersion{vs[0], vs[2]}), store.ErrInvalid)
	wantErr(t, "RestoreTransitKey(none)", s.RestoreTransitKey(ctx, gap, nil), store.ErrInvalid)
	bad := append([]store.TransitKeyVersion{}, vs...)
	bad[2].Sealed = nil
	wantErr(t, "RestoreTransitKey(an empty version)", s.RestoreTransitKey(ctx, gap, bad), store.ErrInvalid)
	if _, _, err := s.GetTransitKey(ctx, store.DefaultTenant, "gap"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused restore left a key: %v", err)
	}
}
