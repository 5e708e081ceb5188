package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// secretMeta is a new path's row (Revision 0) of tenant, at created.
func secretMeta(tenant, path string, current int, created time.Time) store.SecretMeta {
	return store.SecretMeta{Tenant: tenant, Path: path, Sealed: fmt.Appendf(nil, "meta:%s/%s@%d", tenant, path, current),
		CurrentVersion: current, OldestVersion: min(current, 1), CreatedAt: created, UpdatedAt: created}
}

func secretValue(tenant, path string, version int, created time.Time) *store.SecretValue {
	return &store.SecretValue{Tenant: tenant, Path: path, Version: version,
		Sealed: fmt.Appendf(nil, "value:%s/%s/v%d", tenant, path, version), CreatedAt: created}
}

// putSecret writes path with versions 1 to n, one PutSecret each, and
// returns its row as stored.
func putSecret(t *testing.T, s store.Store, tenant, path string, n int) store.SecretMeta {
	t.Helper()
	m := secretMeta(tenant, path, 0, t0)
	for v := 1; v <= n; v++ {
		m.CurrentVersion, m.OldestVersion = v, 1
		m.UpdatedAt = t0.Add(time.Duration(v) * time.Second)
		m.Sealed = fmt.Appendf(nil, "meta:%s/%s@%d", tenant, path, v)
		rev, err := s.PutSecret(t.Context(), m, secretValue(tenant, path, v, m.UpdatedAt), nil)
		must(t, fmt.Sprintf("PutSecret(%s v%d)", path, v), err)
		if rev != m.Revision+1 {
			t.Fatalf("PutSecret(%s v%d): revision %d, want %d", path, v, rev, m.Revision+1)
		}
		m.Revision = rev
	}
	return m
}

func getSecret(t *testing.T, s store.Store, tenant, path string) store.SecretMeta {
	t.Helper()
	m, err := s.GetSecret(t.Context(), tenant, path)
	must(t, fmt.Sprintf("GetSecret(%s, %s)", tenant, path), err)
	return m
}

// sameValues checks which versions of path have a value: want, each as
// secretValue made it at t0 plus its number in seconds.
func sameValues(t *testing.T, s store.Store, what, tenant, path string, upTo int, want ...int) {
	t.Helper()
	have := map[int]bool{}
	for _, v := range want {
		have[v] = true
	}
	for v := 1; v <= upTo; v++ {
		got, err := s.GetSecretValue(t.Context(), tenant, path, v)
		switch {
		case have[v] && err != nil:
			t.Errorf("%s: GetSecretValue(%s v%d): %v", what, path, v, err)
		case have[v]:
			same(t, fmt.Sprintf("%s: GetSecretValue(%s v%d)", what, path, v), got,
				*secretValue(tenant, path, v, t0.Add(time.Duration(v)*time.Second)))
		default:
			wantErr(t, fmt.Sprintf("%s: GetSecretValue(%s v%d)", what, path, v), err, store.ErrNotFound)
		}
	}
}

func testSecretRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Metadata first, without a version (Vault's metadata write).
	m := secretMeta(store.DefaultTenant, "app/db", 0, t0)
	rev, err := s.PutSecret(ctx, m, nil, nil)
	must(t, "PutSecret(metadata only)", err)
	m.Revision = 1
	if rev != 1 {
		t.Errorf("PutSecret(new): revision %d, want 1", rev)
	}
	same(t, "GetSecret(metadata only)", getSecret(t, s, store.DefaultTenant, "app/db"), m)

	// A version: the row's created_at stays, the rest is replaced.
	next := m
	next.Sealed, next.CurrentVersion, next.OldestVersion = []byte("meta v1"), 1, 1
	next.CreatedAt, next.UpdatedAt = t0.Add(time.Hour), t0.Add(time.Second)
	stray := secretValue(store.DefaultTenant, "app/db", 1, t0.Add(time.Second))
	stray.Tenant, stray.Path = "other", "ignored"
	rev, err = s.PutSecret(ctx, next, stray, nil)
	must(t, "PutSecret(v1)", err)
	next.Revision, next.CreatedAt = 2, t0
	if rev != 2 {
		t.Errorf("PutSecret(v1): revision %d, want 2", rev)
	}
	same(t, "GetSecret(v1)", getSecret(t, s, store.DefaultTenant, "app/db"), next)
	// add is put in m's tenant and path, whatever it says.
	sameValues(t, s, "after v1", store.DefaultTenant, "app/db", 2, 1)

	big := putSecret(t, s, store.DefaultTenant, "big", 1)
	big.Sealed = make([]byte, 0, 1<<20)
	for i := range cap(big.Sealed) {
		big.Sealed = append(big.Sealed, byte(i))
	}
	v2 := secretValue(store.DefaultTenant, "big", 2, t0)
	v2.Sealed = big.Sealed
	_, err = s.PutSecret(ctx, big, v2, nil)
	must(t, "PutSecret(1 MiB)", err)
	got, err := s.GetSecretValue(ctx, store.DefaultTenant, "big", 2)
	must(t, "GetSecretValue(1 MiB)", err)
	same(t, "GetSecretValue(1 MiB)", got, *v2)
}

func testSecretNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	putSecret(t, s, store.DefaultTenant, "a", 2)
	_, err := s.GetSecret(ctx, store.DefaultTenant, "nope")
	wantErr(t, "GetSecret(nope)", err, store.ErrNotFound)
	_, err = s.GetSecret(ctx, store.DefaultTenant, "A")
	wantErr(t, "GetSecret(A): paths are case-sensitive", err, store.ErrNotFound)
	for _, v := range []int{0, -1, 3} {
		_, err = s.GetSecretValue(ctx, store.DefaultTenant, "a", v)
		wantErr(t, fmt.Sprintf("GetSecretValue(a, %d)", v), err, store.ErrNotFound)
	}
	_, err = s.GetSecretValue(ctx, store.DefaultTenant, "nope", 1)
	wantErr(t, "GetSecretValue(nope, 1)", err, store.ErrNotFound)
	must(t, "DeleteSecret(nope)", s.DeleteSecret(ctx, store.DefaultTenant, "nope"))
	_, err = s.GetSecretConfig(ctx, store.DefaultTenant)
	wantErr(t, "GetSecretConfig(none set)", err, store.ErrNotFound)
	_, err = s.PutSecret(ctx, secretMeta("nope", "a", 0, t0), nil, nil)
	wantErr(t, "PutSecret(in a tenant that does not exist)", err, store.ErrNotFound)
	wantErr(t, "SetSecretConfig(in a tenant that does not exist)", s.SetSecretConfig(ctx, "nope", []byte("{}")), store.ErrNotFound)
}

// testSecretConflict: a write from a revision that is not the stored one
// writes nothing.
func testSecretConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	m := putSecret(t, s, store.DefaultTenant, "a", 2)
	for _, tc := range []struct {
		name string
		rev  int64
		add  *store.SecretValue
	}{
		{"new over an existing path", 0, nil},
		{"an old revision", 1, secretValue(store.DefaultTenant, "a", 3, t0)},
		{"a revision to come", 3, secretValue(store.DefaultTenant, "a", 3, t0)},
		{"a version that exists", m.Revision, secretValue(store.DefaultTenant, "a", 2, t0)},
	} {
		stale := m
		stale.Revision, stale.Sealed, stale.CurrentVersion = tc.rev, []byte("stale"), 3
		_, err := s.PutSecret(ctx, stale, tc.add, []int{1})
		wantErr(t, "PutSecret("+tc.name+")", err, store.ErrConflict)
	}
	same(t, "the path after conflicts", getSecret(t, s, store.DefaultTenant, "a"), m)
	sameValues(t, s, "after conflicts", store.DefaultTenant, "a", 3, 1, 2)

	// A path deleted since it was read is a conflict too.
	must(t, "DeleteSecret", s.DeleteSecret(ctx, store.DefaultTenant, "a"))
	_, err := s.PutSecret(ctx, m, secretValue(store.DefaultTenant, "a", 3, t0), nil)
	wantErr(t, "PutSecret(deleted since read)", err, store.ErrConflict)
	_, err = s.GetSecret(ctx, store.DefaultTenant, "a")
	wantErr(t, "GetSecret(deleted)", err, store.ErrNotFound)
}

// testSecretErase: erase deletes values (destroy, trimming) in the same
// write; versions not stored are skipped.
func testSecretErase(t *testing.T, s store.Store) {
	ctx := t.Context()
	m := putSecret(t, s, store.DefaultTenant, "a", 4)
	m.OldestVersion = 3
	rev, err := s.PutSecret(ctx, m, nil, []int{1, 2, 2, 9})
	must(t, "PutSecret(erase 1, 2)", err)
	m.Revision = rev
	sameValues(t, s, "after erasing 1 and 2", store.DefaultTenant, "a", 5, 3, 4)
	// Trim and add at once.
	m.CurrentVersion, m.OldestVersion = 5, 4
	five := secretValue(store.DefaultTenant, "a", 5, t0.Add(5*time.Second))
	m.Revision, err = s.PutSecret(ctx, m, five, []int{3})
	must(t, "PutSecret(v5, erase 3)", err)
	sameValues(t, s, "after v5", store.DefaultTenant, "a", 5, 4, 5)
	same(t, "GetSecret", getSecret(t, s, store.DefaultTenant, "a"), m)
	must(t, "DeleteSecret", s.DeleteSecret(ctx, store.DefaultTenant, "a"))
	sameValues(t, s, "after DeleteSecret", store.DefaultTenant, "a", 5)
	// The path can be made again, from nothing.
	putSecret(t, s, store.DefaultTenant, "a", 1)
	sameValues(t, s, "made again", store.DefaultTenant, "a", 5, 1)
}

func testSecretInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	ok := secretMeta(store.DefaultTenant, "a", 1, t0)
	for _, tc := range []struct {
		name  string
		m     func(m *store.SecretMeta)
		add   *store.SecretValue
		erase []int
	}{
		{"no path", func(m *store.SecretMeta) { m.Path = "" }, nil, nil},
		{"bad tenant", func(m *store.SecretMeta) { m.Tenant = "Acme" }, nil, nil},
		{"no metadata", func(m *store.SecretMeta) { m.Sealed = nil }, nil, nil},
		{"negative revision", func(m *store.SecretMeta) { m.Revision = -1 }, nil, nil},
		{"negative version", func(m *store.SecretMeta) { m.CurrentVersion = -1 }, nil, nil},
		{"version 0", func(*store.SecretMeta) {}, secretValue(store.DefaultTenant, "a", 0, t0), nil},
		{"empty value", func(*store.SecretMeta) {}, &store.SecretValue{Version: 1}, nil},
		{"erase 0", func(*store.SecretMeta) {}, nil, []int{0}},
	} {
		m := ok
		tc.m(&m)
		_, err := s.PutSecret(ctx, m, tc.add, tc.erase)
		wantErr(t, "PutSecret("+tc.name+")", err, store.ErrInvalid)
	}
	_, err := s.GetSecret(ctx, store.DefaultTenant, "a")
	wantErr(t, "GetSecret after invalid writes", err, store.ErrNotFound)
	for _, c := range secretCalls(ctx, s, "Acme") {
		wantErr(t, c.name+"(bad tenant)", c.f(), store.ErrInvalid)
	}
	for _, c := range []call{
		{"GetSecret(no path)", func() error { _, err := s.GetSecret(ctx, store.DefaultTenant, ""); return err }},
		{"GetSecretValue(no path)", func() error { _, err := s.GetSecretValue(ctx, store.DefaultTenant, "", 1); return err }},
		{"DeleteSecret(no path)", func() error { return s.DeleteSecret(ctx, store.DefaultTenant, "") }},
		{"ListSecrets(start before prefix)", func() error { _, err := s.ListSecrets(ctx, store.DefaultTenant, "b/", "a", 10); return err }},
		{"ListSecrets(limit 0)", func() error { _, err := s.ListSecrets(ctx, store.DefaultTenant, "", "", 0); return err }},
		{"ListSecrets(limit too high)", func() error {
			_, err := s.ListSecrets(ctx, store.DefaultTenant, "", "", store.MaxSecretList+1)
			return err
		}},
		{"SetSecretConfig(empty)", func() error { return s.SetSecretConfig(ctx, store.DefaultTenant, nil) }},
	} {
		wantErr(t, c.name, c.f(), store.ErrInvalid)
	}
}

// testSecretList: paths by prefix, sorted byte by byte, in pages; LIKE's
// wildcards are plain characters.
func testSecretList(t *testing.T, s store.Store) {
	ctx := t.Context()
	paths := []string{"a", "a/b", "a/b/c", "a/c", "a%", "a_b", "a_/x", "ab", "B", "é/x", "a/é", "a/ü", "a/z"}
	for _, p := range paths {
		putSecret(t, s, store.DefaultTenant, p, 1)
	}
	for _, tc := range []struct {
		prefix, start string
		limit         int
		want          []string
	}{
		{"", "", 100, []string{"B", "a", "a%", "a/b", "a/b/c", "a/c", "a/z", "a/é", "a/ü", "a_/x", "a_b", "ab", "é/x"}},
		{"a/", "a/", 100, []string{"a/b", "a/b/c", "a/c", "a/z", "a/é", "a/ü"}},
		{"a/", "a/", 2, []string{"a/b", "a/b/c"}},
		{"a/", "a/b/c\x01", 2, []string{"a/c", "a/z"}},
		{"a/", "a/c", 100, []string{"a/c", "a/z", "a/é", "a/ü"}},
		{"a/", "a/b0", 100, []string{"a/c", "a/z", "a/é", "a/ü"}},
		{"a/ü", "a/ü", 100, []string{"a/ü"}},
		{"a%", "a%", 100, []string{"a%"}},
		{"a_", "a_", 100, []string{"a_/x", "a_b"}},
		{"a_/", "a_/", 100, []string{"a_/x"}},
		{"é/", "é/", 100, []string{"é/x"}},
		{"A", "A", 100, nil},
		{"z", "z", 100, nil},
		{"a/", "b", 100, nil},
	} {
		got, err := s.ListSecrets(ctx, store.DefaultTenant, tc.prefix, tc.start, tc.limit)
		what := fmt.Sprintf("ListSecrets(%q, from %q, %d)", tc.prefix, tc.start, tc.limit)
		must(t, what, err)
		same(t, what, got, tc.want)
	}
}

func testSecretConfig(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateTenant(acme)", s.CreateTenant(ctx, tenant("acme", t0)))
	must(t, "SetSecretConfig", s.SetSecretConfig(ctx, store.DefaultTenant, []byte(`{"max_versions":3}`)))
	must(t, "SetSecretConfig(again)", s.SetSecretConfig(ctx, store.DefaultTenant, []byte(`{"max_versions":4}`)))
	must(t, "SetSecretConfig(acme)", s.SetSecretConfig(ctx, "acme", []byte(`{"cas_required":true}`)))
	for tn, want := range map[string]string{store.DefaultTenant: `{"max_versions":4}`, "acme": `{"cas_required":true}`} {
		got, err := s.GetSecretConfig(ctx, tn)
		must(t, "GetSecretConfig("+tn+")", err)
		same(t, "GetSecretConfig("+tn+")", string(got), want)
	}
	// The configuration does not keep its tenant, and goes with it.
	must(t, "DeleteTenant(acme, with a configuration)", s.DeleteTenant(ctx, "acme"))
	must(t, "CreateTenant(acme again)", s.CreateTenant(ctx, tenant("acme", t0)))
	_, err := s.GetSecretConfig(ctx, "acme")
	wantErr(t, "GetSecretConfig(acme made again)", err, store.ErrNotFound)
}

// testSecretTenants: a path of one tenant is invisible, and untouchable,
// under another tenant's name; a tenant with secrets is not deleted.
func testSecretTenants(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateTenant(acme)", s.CreateTenant(ctx, tenant("acme", t0)))
	must(t, "CreateTenant(beta)", s.CreateTenant(ctx, tenant("beta", t0)))
	am := putSecret(t, s, "acme", "shared", 2)
	putSecret(t, s, store.DefaultTenant, "shared", 1)
	putSecret(t, s, "acme", "acme-only", 1)

	_, err := s.GetSecret(ctx, "beta", "shared")
	wantErr(t, "GetSecret(beta, shared)", err, store.ErrNotFound)
	_, err = s.GetSecretValue(ctx, store.DefaultTenant, "shared", 2)
	wantErr(t, "GetSecretValue(default, shared, 2)", err, store.ErrNotFound)
	_, err = s.GetSecretValue(ctx, "beta", "acme-only", 1)
	wantErr(t, "GetSecretValue(beta, acme-only, 1)", err, store.ErrNotFound)
	for tn, want := range map[string][]string{"acme": {"acme-only", "shared"}, store.DefaultTenant: {"shared"}, "beta": nil} {
		got, err := s.ListSecrets(ctx, tn, "", "", 100)
		must(t, "ListSecrets("+tn+")", err)
		same(t, "ListSecrets("+tn+")", got, want)
	}
	// Another tenant's write from acme's revision conflicts in its own
	// namespace; its deletes and erases touch nothing of acme's.
	beta := am
	beta.Tenant = "beta"
	_, err = s.PutSecret(ctx, beta, nil, []int{1, 2})
	wantErr(t, "PutSecret(beta, shared, acme's revision)", err, store.ErrConflict)
	must(t, "DeleteSecret(beta, shared)", s.DeleteSecret(ctx, "beta", "shared"))
	def := getSecret(t, s, store.DefaultTenant, "shared")
	_, err = s.PutSecret(ctx, def, nil, []int{1, 2})
	must(t, "PutSecret(default, shared, erase 1 and 2)", err)
	must(t, "DeleteSecret(default, shared)", s.DeleteSecret(ctx, store.DefaultTenant, "shared"))
	same(t, "acme's path", getSecret(t, s, "acme", "shared"), am)
	sameValues(t, s, "acme's path", "acme", "shared", 2, 1, 2)

	wantErrNaming(t, "DeleteTenant(acme, with secrets)", s.DeleteTenant(ctx, "acme"), store.ErrNotEmpty, "acme")
	same(t, "acme's path after the refused delete", getSecret(t, s, "acme", "shared"), am)
	must(t, "DeleteSecret(acme, shared)", s.DeleteSecret(ctx, "acme", "shared"))
	wantErr(t, "DeleteTenant(acme, with one secret)", s.DeleteTenant(ctx, "acme"), store.ErrNotEmpty)
	must(t, "DeleteSecret(acme, acme-only)", s.DeleteSecret(ctx, "acme", "acme-only"))
	must(t, "DeleteTenant(acme, empty)", s.DeleteTenant(ctx, "acme"))
}

// testSecretConcurrent: of 20 writes of one path from one revision (and
// of 20 creations of one path) exactly one wins; the others conflict.
func testSecretConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	errs := race(20, func(i int) error {
		m := secretMeta(store.DefaultTenant, "new", 1, t0)
		m.Sealed = fmt.Appendf(nil, "creator %d", i)
		_, err := s.PutSecret(ctx, m, secretValue(store.DefaultTenant, "new", 1, t0), nil)
		return err
	})
	w := oneWinner(t, errs, store.ErrConflict)
	same(t, "the created path's metadata", string(getSecret(t, s, store.DefaultTenant, "new").Sealed), fmt.Sprintf("creator %d", w))

	m := putSecret(t, s, store.DefaultTenant, "a", 1)
	var won atomic.Int64
	errs = race(20, func(i int) error {
		next := m
		next.CurrentVersion, next.Sealed = 2, fmt.Appendf(nil, "writer %d", i)
		v := secretValue(store.DefaultTenant, "a", 2, t0)
		v.Sealed = fmt.Appendf(nil, "value of writer %d", i)
		rev, err := s.PutSecret(ctx, next, v, []int{1})
		if err == nil {
			won.Store(rev)
		}
		return err
	})
	w = oneWinner(t, errs, store.ErrConflict)
	got := getSecret(t, s, store.DefaultTenant, "a")
	if string(got.Sealed) != fmt.Sprintf("writer %d", w) || got.Revision != m.Revision+1 || won.Load() != got.Revision {
		t.Errorf("after the race: %q at revision %d (winner's %d), want writer %d's at %d", got.Sealed, got.Revision, won.Load(), w, m.Revision+1)
	}
	v, err := s.GetSecretValue(ctx, store.DefaultTenant, "a", 2)
	must(t, "GetSecretValue(a, 2)", err)
	if !strings.HasSuffix(string(v.Sealed), fmt.Sprintf("writer %d", w)) {
		t.Errorf("version 2 is %q, want the winner's (writer %d)", v.Sealed, w)
	}
	_, err = s.GetSecretValue(ctx, store.DefaultTenant, "a", 1)
	wantErr(t, "GetSecretValue(a, 1) erased by the winner", err, store.ErrNotFound)
}

// secretCalls are the secret calls that take a tenant name, each with
// tenant, for the tests of tenant names and of cancellation.
func secretCalls(ctx context.Context, s store.Store, tenant string) []call {
	m := secretMeta(tenant, "p", 1, t0)
	return []call{
		{"GetSecret", func() error { _, err := s.GetSecret(ctx, tenant, "p"); return err }},
		{"GetSecretValue", func() error { _, err := s.GetSecretValue(ctx, tenant, "p", 1); return err }},
		{"PutSecret", func() error { _, err := s.PutSecret(ctx, m, secretValue(tenant, "p", 1, t0), nil); return err }},
		{"DeleteSecret", func() error { return s.DeleteSecret(ctx, tenant, "p") }},
		{"ListSecrets", func() error { _, err := s.ListSecrets(ctx, tenant, "", "", 10); return err }},
		{"GetSecretConfig", func() error { _, err := s.GetSecretConfig(ctx, tenant); return err }},
		{"SetSecretConfig", func() error { return s.SetSecretConfig(ctx, tenant, []byte("{}")) }},
	}
}
