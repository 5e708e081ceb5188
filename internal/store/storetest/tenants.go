package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
)

func tenant(name string, created time.Time) store.Tenant {
	return store.Tenant{Name: name, CreatedAt: created}
}

func getTenant(t *testing.T, s store.Store, name string) store.Tenant {
	t.Helper()
	got, err := s.GetTenant(t.Context(), name)
	if err != nil {
		t.Fatalf("GetTenant(%s): %v", name, err)
	}
	return got
}

// wantErrNaming is wantErr that also wants the error's text to name what
// it is about.
func wantErrNaming(t *testing.T, what string, err, want error, name string) {
	t.Helper()
	wantErr(t, what, err, want)
	if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
		t.Errorf("%s: error %q does not name %q", what, err, name)
	}
}

// invalidTenants are names ValidTenantName refuses.
var invalidTenants = []string{"", "Acme", "-acme", "ac me", "a/b", strings.Repeat("a", store.MaxTenantName+1)}

// testTenantDefault: the default tenant exists in a new store, without a
// data key, and cannot be deleted or created again.
func testTenantDefault(t *testing.T, s store.Store) {
	ctx := t.Context()
	def := getTenant(t, s, store.DefaultTenant)
	if def.Name != store.DefaultTenant || def.DataKey != nil || def.CreatedAt.IsZero() || def.CreatedAt.Location() != time.UTC {
		t.Errorf("default tenant: %+v, want name %q, no data key, a creation time in UTC", def, store.DefaultTenant)
	}
	list, err := s.ListTenants(ctx)
	must(t, "ListTenants", err)
	same(t, "ListTenants", list, []store.Tenant{def})
	wantErr(t, "DeleteTenant(default)", s.DeleteTenant(ctx, store.DefaultTenant), store.ErrInvalid)
	wantErr(t, "CreateTenant(default)", s.CreateTenant(ctx, tenant(store.DefaultTenant, t0)), store.ErrConflict)
	same(t, "default tenant after both", getTenant(t, s, store.DefaultTenant), def)
}

func testTenantRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	def := getTenant(t, s, store.DefaultTenant)
	acme := tenant("acme", t0)
	keyed := tenant("beta-1", t0.Add(time.Hour))
	keyed.DataKey = []byte("sealed data key")
	digit := tenant("0_zed", t0.Add(-time.Hour))
	for _, tn := range []store.Tenant{acme, keyed, digit} {
		must(t, "CreateTenant("+tn.Name+")", s.CreateTenant(ctx, tn))
		same(t, "GetTenant("+tn.Name+")", getTenant(t, s, tn.Name), tn)
	}
	list, err := s.ListTenants(ctx)
	must(t, "ListTenants", err)
	same(t, "ListTenants (by name)", list, []store.Tenant{digit, acme, keyed, def})

	_, err = s.GetTenant(ctx, "nope")
	wantErr(t, "GetTenant(nope)", err, store.ErrNotFound)
	other := tenant("acme", t0.Add(time.Hour))
	other.DataKey = []byte("impostor")
	wantErr(t, "CreateTenant(acme again)", s.CreateTenant(ctx, other), store.ErrConflict)
	same(t, "acme after the conflict", getTenant(t, s, "acme"), acme)
}

// testTenantNames: every method that takes a tenant refuses a name
// ValidTenantName refuses, and stores nothing.
func testTenantNames(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, name := range invalidTenants {
		if store.ValidTenantName(name) == nil {
			t.Fatalf("ValidTenantName(%q) accepts it", name)
		}
		for _, c := range tenantCalls(ctx, s, name) {
			wantErr(t, fmt.Sprintf("%s(%q)", c.name, name), c.f(), store.ErrInvalid)
		}
	}
	list, err := s.ListTenants(ctx)
	must(t, "ListTenants", err)
	if len(list) != 1 {
		t.Errorf("tenants after invalid names: %+v, want only the default", list)
	}
	clients, err := s.ListClients(ctx)
	must(t, "ListClients", err)
	users, err := s.ListUsers(ctx)
	must(t, "ListUsers", err)
	if len(clients)+len(users) != 0 {
		t.Errorf("stored in invalid tenants: %+v %+v", clients, users)
	}
}

// tenantCalls are the calls that take a tenant name, each with name (but
// for the creation of clients and users, where an empty tenant is the
// default one).
func tenantCalls(ctx context.Context, s store.Store, name string) []call {
	calls := []call{
		{"CreateTenant", func() error { return s.CreateTenant(ctx, tenant(name, t0)) }},
		{"GetTenant", func() error { _, err := s.GetTenant(ctx, name); return err }},
		{"SetTenantDataKey", func() error { return s.SetTenantDataKey(ctx, name, []byte("k")) }},
		{"DeleteTenant", func() error { return s.DeleteTenant(ctx, name) }},
		{"ListClientsIn", func() error { _, err := s.ListClientsIn(ctx, name); return err }},
		{"ListUsersIn", func() error { _, err := s.ListUsersIn(ctx, name); return err }},
		{"GetUserByName", func() error { _, err := s.GetUserByName(ctx, name, "alice"); return err }},
	}
	calls = append(calls, transitCalls(ctx, s, name)...)
	calls = append(calls, secretCalls(ctx, s, name)...)
	if name != "" {
		calls = append(calls,
			call{"CreateClient", func() error { return s.CreateClient(ctx, client("c-"+name, t0, name)) }},
			call{"CreateUser", func() error { return s.CreateUser(ctx, user("u-"+name, "alice", t0, name)) }})
	}
	return calls
}

// call is one store call, named, for tables of calls.
type call struct {
	name string
	f    func() error
}

func testTenantDataKey(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateTenant(acme)", s.CreateTenant(ctx, tenant("acme", t0)))
	must(t, "CreateTenant(beta)", s.CreateTenant(ctx, tenant("beta", t0)))
	must(t, "SetTenantDataKey(acme)", s.SetTenantDataKey(ctx, "acme", []byte("key one")))
	want := tenant("acme", t0)
	want.DataKey = []byte("key one")
	same(t, "acme with its data key", getTenant(t, s, "acme"), want)
	wantErr(t, "SetTenantDataKey(acme again)", s.SetTenantDataKey(ctx, "acme", []byte("key two")), store.ErrConflict)
	same(t, "acme after the second key", getTenant(t, s, "acme"), want)
	same(t, "beta untouched", getTenant(t, s, "beta"), tenant("beta", t0))

	wantErrNaming(t, "SetTenantDataKey(nope)", s.SetTenantDataKey(ctx, "nope", []byte("k")), store.ErrNotFound, "nope")
	wantErr(t, "SetTenantDataKey(beta, empty)", s.SetTenantDataKey(ctx, "beta", nil), store.ErrInvalid)
	wantErr(t, "SetTenantDataKey(beta, empty)", s.SetTenantDataKey(ctx, "beta", []byte{}), store.ErrInvalid)
	same(t, "beta after empty keys", getTenant(t, s, "beta"), tenant("beta", t0))
	must(t, "SetTenantDataKey(default)", s.SetTenantDataKey(ctx, store.DefaultTenant, []byte("default key")))
	if got := getTenant(t, s, store.DefaultTenant).DataKey; string(got) != "default key" {
		t.Errorf("default tenant's data key: %q", got)
	}
}

// testTenantDataKeyRace: nodes racing to set a tenant's data key agree on
// one: exactly one call succeeds, and its key is the one stored.
func testTenantDataKeyRace(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateTenant", s.CreateTenant(ctx, tenant("race", t0)))
	errs := race(20, func(i int) error { return s.SetTenantDataKey(ctx, "race", fmt.Appendf(nil, "key %d", i)) })
	winner := oneWinner(t, errs, store.ErrConflict)
	if got, want := getTenant(t, s, "race").DataKey, fmt.Sprintf("key %d", winner); string(got) != want {
		t.Errorf("stored data key %q, want the winner's %q", got, want)
	}
}

// race runs f(0), ..., f(n-1) at once and returns their errors.
func race(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// oneWinner checks that exactly one of errs is nil and the others are
// lost, and returns the winner's index.
func oneWinner(t *testing.T, errs []error, lost error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Errorf("calls %d and %d both succeeded", winner, i)
			}
			winner = i
		case !errors.Is(err, lost):
			t.Errorf("call %d: %v, want nil or %v", i, err, lost)
		}
	}
	if winner < 0 {
		t.Fatalf("no call succeeded: %v", errs)
	}
	return winner
}

// testTenantDelete: a tenant is deleted only once it has no clients,
// users, transit keys or secrets; then nothing more can be created in it.
func testTenantDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	wantErr(t, "DeleteTenant(nope)", s.DeleteTenant(ctx, "nope"), store.ErrNotFound)
	acme := tenant("acme", t0)
	must(t, "CreateTenant", s.CreateTenant(ctx, acme))
	c := client("c1", t0)
	c.Tenant = "acme"
	must(t, "CreateClient", s.CreateClient(ctx, c))
	wantErrNaming(t, "DeleteTenant(with a client)", s.DeleteTenant(ctx, "acme"), store.ErrNotEmpty, "acme")
	must(t, "DeleteClient", s.DeleteClient(ctx, "c1"))
	u := user("u1", "alice", t0)
	u.Tenant = "acme"
	must(t, "CreateUser", s.CreateUser(ctx, u))
	wantErr(t, "DeleteTenant(with a user)", s.DeleteTenant(ctx, "acme"), store.ErrNotEmpty)
	same(t, "acme after refused deletes", getTenant(t, s, "acme"), acme)
	must(t, "DeleteUser", s.DeleteUser(ctx, "u1"))

	// An internal transit key row (the transit layer's own) does not keep
	// the tenant; a key of the tenant's does, and then the internal row
	// stays too.
	internal, iv := transitKey("acme", store.InternalKeyPrefix+"wrapping_key", t0)
	must(t, "CreateTransitKey(internal)", s.CreateTransitKey(ctx, internal, iv))
	k, kv := transitKey("acme", "orders", t0)
	must(t, "CreateTransitKey", s.CreateTransitKey(ctx, k, kv))
	wantErr(t, "DeleteTenant(with a transit key)", s.DeleteTenant(ctx, "acme"), store.ErrNotEmpty)
	if _, _, err := s.GetTransitKey(ctx, "acme", internal.Name); err != nil {
		t.Errorf("the internal row after a refused DeleteTenant: %v", err)
	}
	must(t, "DeleteTransitKey", s.DeleteTransitKey(ctx, "acme", "orders", 1))
	// A secret keeps it too; its mount configuration does not.
	must(t, "SetSecretConfig", s.SetSecretConfig(ctx, "acme", []byte(`{"max_versions":2}`)))
	_, err := s.PutSecret(ctx, secretMeta("acme", "db", 0, t0), nil, nil)
	must(t, "PutSecret", err)
	wantErr(t, "DeleteTenant(with a secret)", s.DeleteTenant(ctx, "acme"), store.ErrNotEmpty)
	must(t, "DeleteSecret", s.DeleteSecret(ctx, "acme", "db"))

	must(t, "DeleteTenant(empty but for an internal row)", s.DeleteTenant(ctx, "acme"))
	_, err = s.GetTenant(ctx, "acme")
	wantErr(t, "GetTenant after delete", err, store.ErrNotFound)
	wantErr(t, "DeleteTenant again", s.DeleteTenant(ctx, "acme"), store.ErrNotFound)
	wantErr(t, "CreateClient in a deleted tenant", s.CreateClient(ctx, c), store.ErrNotFound)
	if _, _, err := s.GetTransitKey(ctx, "acme", internal.Name); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the internal row outlived its tenant: %v", err)
	}
	// The name can be used again.
	must(t, "CreateTenant after delete", s.CreateTenant(ctx, acme))
}

// testTenantClients: a client belongs to its tenant; none is created in a
// tenant that does not exist.
func testTenantClients(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateTenant", s.CreateTenant(ctx, tenant("acme", t0)))
	def := client("c1", t0)
	def.Tenant = "" // the default
	a2, a3 := client("c2", t0.Add(time.Second), "acme"), client("c3", t0, "acme")
	for _, c := range []store.Client{def, a2, a3} {
		must(t, "CreateClient("+c.ID+")", s.CreateClient(ctx, c))
	}
	def.Tenant = store.DefaultTenant
	got, err := s.GetClient(ctx, "c2")
	must(t, "GetClient(c2)", err)
	same(t, "GetClient(c2)", got, a2)

	nope := client("c4", t0, "nope")
	wantErrNaming(t, "CreateClient(tenant nope)", s.CreateClient(ctx, nope), store.ErrNotFound, "nope")
	_, err = s.GetClient(ctx, "c4")
	wantErr(t, "GetClient(c4)", err, store.ErrNotFound)
	// Client ids are unique across tenants.
	wantErr(t, "CreateClient(c1 in acme)", s.CreateClient(ctx, client("c1", t0, "acme")), store.ErrConflict)

	listsIn(t, "ListClientsIn", s.ListClientsIn, map[string][]store.Client{"acme": {a3, a2}, store.DefaultTenant: {def}, "nope": nil})
	list, err := s.ListClients(ctx)
	must(t, "ListClients", err)
	same(t, "ListClients (every tenant)", list, []store.Client{def, a3, a2})

	// An update keeps the tenant.
	moved := a2
	moved.Tenant, moved.Name, moved.UpdatedAt = store.DefaultTenant, "renamed", t0.Add(time.Hour)
	must(t, "UpdateClient", s.UpdateClient(ctx, moved))
	moved.Tenant = "acme"
	got, err = s.GetClient(ctx, "c2")
	must(t, "GetClient after UpdateClient", err)
	same(t, "GetClient after UpdateClient (tenant kept)", got, moved)
}

// listsIn checks that list, a ListClientsIn or the like, returns want[t]
// for each tenant t.
func listsIn[T any](t *testing.T, name string, list func(context.Context, string) ([]T, error), want map[string][]T) {
	t.Helper()
	for tn, w := range want {
		got, err := list(t.Context(), tn)
		must(t, name+"("+tn+")", err)
		same(t, name+"("+tn+")", got, w)
	}
}

// testTenantUsers: usernames are unique per tenant, and a user is found
// by name only under its own tenant.
func testTenantUsers(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, tn := range []string{"acme", "beta"} {
		must(t, "CreateTenant("+tn+")", s.CreateTenant(ctx, tenant(tn, t0)))
	}
	def := user("u1", "alice", t0)
	acme := user("u2", "alice", t0.Add(time.Second), "acme")
	carol := user("u3", "carol", t0, "acme")
	for _, u := range []store.User{def, acme, carol} {
		must(t, "CreateUser("+u.ID+")", s.CreateUser(ctx, u))
	}
	for _, c := range []struct {
		tenant string
		want   store.User
	}{{store.DefaultTenant, def}, {"acme", acme}} {
		got, err := s.GetUserByName(ctx, c.tenant, "alice")
		must(t, "GetUserByName("+c.tenant+", alice)", err)
		same(t, "GetUserByName("+c.tenant+", alice)", got, c.want)
	}
	for _, c := range [][2]string{{"beta", "alice"}, {store.DefaultTenant, "carol"}, {"nope", "alice"}} {
		_, err := s.GetUserByName(ctx, c[0], c[1])
		wantErr(t, fmt.Sprintf("GetUserByName(%s, %s)", c[0], c[1]), err, store.ErrNotFound)
	}
	wantErr(t, "CreateUser(alice in acme again)", s.CreateUser(ctx, user("u4", "alice", t0, "acme")), store.ErrConflict)
	wantErr(t, "CreateUser(u1 in beta)", s.CreateUser(ctx, user("u1", "dave", t0, "beta")), store.ErrConflict)
	wantErrNaming(t, "CreateUser(tenant nope)", s.CreateUser(ctx, user("u5", "erin", t0, "nope")), store.ErrNotFound, "nope")

	listsIn(t, "ListUsersIn", s.ListUsersIn, map[string][]store.User{"acme": {carol, acme}, store.DefaultTenant: {def}, "beta": nil})
	list, err := s.ListUsers(ctx)
	must(t, "ListUsers", err)
	same(t, "ListUsers (every tenant)", list, []store.User{def, carol, acme})

	// Renaming onto a name another tenant has is fine; onto one of its
	// own tenant, a conflict. An update keeps the tenant.
	upd := carol
	upd.Tenant, upd.Username, upd.UpdatedAt = "beta", "bob", t0.Add(time.Hour)
	must(t, "CreateUser(bob in default)", s.CreateUser(ctx, user("u6", "bob", t0)))
	must(t, "UpdateUser(carol→bob)", s.UpdateUser(ctx, upd))
	upd.Tenant = "acme"
	got, err := s.GetUserByName(ctx, "acme", "bob")
	must(t, "GetUserByName(acme, bob)", err)
	same(t, "renamed user (tenant kept)", got, upd)
	taken := upd
	taken.Username = "alice"
	wantErr(t, "UpdateUser(bob→alice in acme)", s.UpdateUser(ctx, taken), store.ErrConflict)
}

// LegacyClients and LegacyUsers are the rows a backend's migration test
// writes into a database of the schema before tenants, which had no
// Tenant column; CheckLegacyTenants then checks what the migration made
// of them.
func LegacyClients() []store.Client {
	return []store.Client{client("legacy-c1", t0, ""), client("legacy-c2", t0.Add(time.Second), "")}
}

// LegacyUsers: see LegacyClients.
func LegacyUsers() []store.User {
	return []store.User{user("legacy-u1", "alice", t0, ""), user("legacy-u2", "bob", t0.Add(time.Second), "")}
}

// CheckLegacyTenants checks that the migration to tenants put every client
// and user of LegacyClients and LegacyUsers into the default tenant, the
// only one, where they work as before; and that the schema now has
// tenants.
func CheckLegacyTenants(t *testing.T, s store.Store) {
	t.Helper()
	ctx := t.Context()
	def := getTenant(t, s, store.DefaultTenant)
	if def.DataKey != nil {
		t.Errorf("the migrated default tenant has a data key: %q", def.DataKey)
	}
	tenants, err := s.ListTenants(ctx)
	must(t, "ListTenants", err)
	same(t, "tenants after the migration", tenants, []store.Tenant{def})
	wantClients, wantUsers := LegacyClients(), LegacyUsers()
	for i := range wantClients {
		wantClients[i].Tenant = store.DefaultTenant
	}
	for i := range wantUsers {
		wantUsers[i].Tenant = store.DefaultTenant
	}
	clients, err := s.ListClientsIn(ctx, store.DefaultTenant)
	must(t, "ListClientsIn(default)", err)
	same(t, "clients after the migration", clients, wantClients)
	users, err := s.ListUsers(ctx)
	must(t, "ListUsers", err)
	same(t, "users after the migration", users, wantUsers)
	got, err := s.GetUserByName(ctx, store.DefaultTenant, "alice")
	must(t, "GetUserByName(default, alice)", err)
	same(t, "alice after the migration", got, wantUsers[0])

	// Usernames are still unique in the default tenant, and now only there.
	wantErr(t, "CreateUser(alice again)", s.CreateUser(ctx, user("u-new", "alice", t0)), store.ErrConflict)
	must(t, "CreateTenant", s.CreateTenant(ctx, tenant("acme", t0)))
	must(t, "CreateUser(alice in acme)", s.CreateUser(ctx, user("u-new", "alice", t0, "acme")))
	must(t, "UpdateClient", s.UpdateClient(ctx, store.Client{ID: "legacy-c1", Name: "renamed", UpdatedAt: t0.Add(time.Hour)}))
	wantErr(t, "DeleteTenant(default)", s.DeleteTenant(ctx, store.DefaultTenant), store.ErrInvalid)
}
