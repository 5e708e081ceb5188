package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/sqlite"
	"github.com/keygate/keygate/internal/testnet"
)

// tenantRecords makes the tenant and stores count records of each kind
// sealed under its data key, as the transit and secret engines store them
// (each with its record's additional data); check opens every one of them
// as the engines do (the held key, then the row's), and fails on one that
// does not open to what was sealed.
func tenantRecords(t *testing.T, n *Node, tenant string, count int) (check func(n *Node) error) {
	t.Helper()
	ctx := t.Context()
	st := n.Store()
	if tenant != store.DefaultTenant {
		if err := st.CreateTenant(ctx, store.Tenant{Name: tenant, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	k, err := n.TenantKeys().Fresh(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	want := map[store.SealedRef]string{}
	seal := func(ref store.SealedRef) []byte {
		pt := fmt.Sprintf("%s %s %s %d", tenant, ref.Kind, ref.Name, ref.Version)
		want[ref] = pt
		b, err := k.Seal([]byte(pt), tenantkey.RecordAD(tenant, ref))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	now := time.Now().UTC()
	for i := range count {
		name := fmt.Sprintf("k%03d", i)
		v := store.TransitKeyVersion{Tenant: tenant, Name: name, Version: 1, CreatedAt: now,
			Sealed: seal(store.SealedRef{Kind: store.SealedTransitVersion, Name: name, Version: 1})}
		if err := st.CreateTransitKey(ctx, store.TransitKey{Tenant: tenant, Name: name, Type: "aes256-gcm96", Config: []byte("{}"),
			CreatedAt: now, UpdatedAt: now}, v); err != nil {
			t.Fatal(err)
		}
		path := fmt.Sprintf("app/s%03d", i)
		m := store.SecretMeta{Tenant: tenant, Path: path, CurrentVersion: 1, OldestVersion: 1, CreatedAt: now, UpdatedAt: now,
			Sealed: seal(store.SealedRef{Kind: store.SealedSecretMeta, Name: path})}
		sv := &store.SecretValue{Version: 1, CreatedAt: now, Sealed: seal(store.SealedRef{Kind: store.SealedSecretValue, Name: path, Version: 1})}
		if _, err := st.PutSecret(ctx, m, sv, nil); err != nil {
			t.Fatal(err)
		}
	}
	return func(n *Node) error {
		recs, err := n.Store().TenantSealed(ctx, tenant, store.SealedRef{}, store.MaxSealedPage)
		if err != nil {
			return err
		}
		if len(recs) != len(want) {
			return fmt.Errorf("%d records, want %d", len(recs), len(want))
		}
		for _, rec := range recs {
			ad := tenantkey.RecordAD(tenant, rec.SealedRef)
			k, err := n.TenantKeys().Get(ctx, tenant)
			if err != nil {
				return err
			}
			pt, err := k.Open(rec.Sealed, ad)
			if errors.Is(err, tenantkey.ErrOpen) {
				if k, err = n.TenantKeys().Fresh(ctx, tenant); err != nil {
					return err
				}
				pt, err = k.Open(rec.Sealed, ad)
			}
			if err != nil || string(pt) != want[rec.SealedRef] {
				return fmt.Errorf("%s %s v%d: opened %q, %v", rec.Kind, rec.Name, rec.Version, pt, err)
			}
		}
		return nil
	}
}

// versionsOf counts the tenant's records by the data key version they are
// sealed under.
func versionsOf(t *testing.T, st store.Store, tenant string) map[uint32]int {
	t.Helper()
	recs, err := st.TenantSealed(t.Context(), tenant, store.SealedRef{}, store.MaxSealedPage)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint32]int{}
	for _, rec := range recs {
		v, _ := tenantkey.SealedVersion(rec.Sealed)
		out[v]++
	}
	return out
}

// waitTenantRekey waits until the tenant's rotation satisfies ok.
func waitTenantRekey(t *testing.T, n *Node, tenant, what string, ok func(TenantRekeyStatus) bool) TenantRekeyStatus {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := n.TenantRekeyStatus(t.Context(), tenant)
		if err == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the rotation is at %+v (%v)", what, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTenantRekey: a tenant's data key is rotated while its records are
// rewrapped in the background; stopped partway and left with a dead
// node's lease, the rotation is carried on by the next node once the lease
// runs out, ends with every record under the new version and the old one
// retired, and touches no other tenant.
func TestTenantRekey(t *testing.T) {
	r := newRekeyRig(t, config.TokenService{})
	n, stop := r.open("a", r.oldKey)
	ctx := t.Context()
	check := tenantRecords(t, n, "acme", 20) // 60 records
	checkBeta := tenantRecords(t, n, "beta", 3)

	if _, err := n.StartTenantRekey(ctx, "zeta", 0); !errors.Is(err, ErrTenantUnknown) {
		t.Errorf("StartTenantRekey(unknown tenant): %v, want ErrTenantUnknown", err)
	}
	st, err := n.StartTenantRekey(ctx, "acme", 20)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != store.TenantRekeyRewrapping || st.Version != 2 || st.Current != 2 || !slices.Equal(st.Versions, []uint32{1, 2}) {
		t.Fatalf("started: %+v", st)
	}
	if _, err := n.StartTenantRekey(ctx, "acme", 0); !errors.Is(err, ErrTenantRekeyRunning) {
		t.Errorf("a second start while one runs: %v, want ErrTenantRekeyRunning", err)
	}
	mid := waitTenantRekey(t, n, "acme", "partway", func(s TenantRekeyStatus) bool { return s.Done >= 5 })
	stop()

	// A node killed while rewrapping leaves its lease in the state.
	db, err := sqlite.Open(ctx, filepath.Join(r.dir, "a", StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	got := versionsOf(t, db, "acme")
	if got[1] == 0 || got[2] == 0 {
		t.Fatalf("stopped at %+v with records under %v, want partway", mid, got)
	}
	state, err := db.GetTenantRekey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	state.Worker, state.LeaseUntil = "kgw_dead", time.Now().Add(2*time.Second).UTC()
	if err := db.PutTenantRekey(ctx, state, state.Revision); err != nil {
		t.Fatal(err)
	}
	db.Close()
	n, _ = r.open("a", r.oldKey)
	if err := check(n); err != nil {
		t.Fatalf("partway, after a restart: %v", err)
	}
	done := waitTenantRekey(t, n, "acme", "the end", func(s TenantRekeyStatus) bool { return s.State == store.TenantRekeyDone })
	if time.Since(state.LeaseUntil) < 0 {
		t.Errorf("finished before the dead node's lease ran out")
	}
	if done.Done != 60 || done.Total != 60 || !slices.Equal(done.Versions, []uint32{2}) || done.FinishedAt.IsZero() || done.Failed != "" {
		t.Errorf("finished at %+v, want 60 of 60 and only version 2", done)
	}
	if got := versionsOf(t, n.Store(), "acme"); len(got) != 1 || got[2] != 60 {
		t.Errorf("records under %v, want all 60 under version 2", got)
	}
	if err := check(n); err != nil {
		t.Errorf("after the rotation: %v", err)
	}
	if got := versionsOf(t, n.Store(), "beta"); len(got) != 1 || got[1] != 9 {
		t.Errorf("the other tenant's records are under %v, want all 9 under its version 1", got)
	}
	if err := checkBeta(n); err != nil {
		t.Errorf("the other tenant: %v", err)
	}
	// The next rotation starts from the finished one.
	if st, err := n.StartTenantRekey(ctx, "acme", 0); err != nil || st.Version != 3 {
		t.Fatalf("a second rotation: %+v, %v", st, err)
	}
	waitTenantRekey(t, n, "acme", "the second", func(s TenantRekeyStatus) bool { return s.State == store.TenantRekeyDone })
	if got := versionsOf(t, n.Store(), "acme"); got[3] != 60 {
		t.Errorf("after the second rotation: %v", got)
	}
}

// TestTenantRekeyAltered: a record altered in the store opens under no
// version; the rotation stops before retiring anything, naming it, and the
// other records stay readable.
func TestTenantRekeyAltered(t *testing.T) {
	r := newRekeyRig(t, config.TokenService{})
	n, _ := r.open("a", r.oldKey)
	ctx := t.Context()
	tenantRecords(t, n, "acme", 3)
	recs, err := n.Store().TenantSealed(ctx, "acme", store.SealedRef{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	bad := recs[4] // a secret's metadata
	altered := slices.Clone(bad.Sealed)
	altered[len(altered)-1] ^= 1
	if err := n.Store().RewrapTenantSealed(ctx, "acme", bad.SealedRef, bad.Sealed, altered); err != nil {
		t.Fatal(err)
	}
	if _, err := n.StartTenantRekey(ctx, "acme", 0); err != nil {
		t.Fatal(err)
	}
	st := waitTenantRekey(t, n, "acme", "the failure", func(s TenantRekeyStatus) bool { return s.Failed != "" })
	if st.State != store.TenantRekeyRewrapping || !slices.Equal(st.Versions, []uint32{1, 2}) {
		t.Errorf("after the failure: %+v, want still rewrapping with both versions", st)
	}
	if want := bad.Name; !contains(st.Failed, want) {
		t.Errorf("the failure %q does not name the record %q", st.Failed, want)
	}
	time.Sleep(RekeyPoll + RekeyGrace)
	if st, _ := n.TenantRekeyStatus(ctx, "acme"); st.State != store.TenantRekeyRewrapping || len(st.Versions) != 2 {
		t.Errorf("later: %+v, want still rewrapping with both versions", st)
	}
}

// TestTenantRekeyFleet: two nodes on one PostgreSQL store and one Redis. A
// rotation of a tenant's data key started on a, while b opens every one of
// the tenant's records in a loop: not one open fails from the start to the
// end, and b drops the retired version once the rotation ends.
func TestTenantRekeyFleet(t *testing.T) {
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	redisURL, prefix := testnet.RedisPrefix(t)
	r := newRekeyRig(t, config.TokenService{DatabaseURL: testnet.PostgresSchema(t, base, "kgtrekey"), RedisURL: redisURL, RedisPrefix: prefix})
	a, _ := r.open("a", r.oldKey)
	b, _ := r.open("b", r.oldKey)
	check := tenantRecords(t, a, "acme", 40)
	if err := check(b); err != nil {
		t.Fatal(err)
	}
	stop := hammer(t, "the rotation", func() error { return check(b) })
	if _, err := a.StartTenantRekey(t.Context(), "acme", 300); err != nil {
		t.Fatal(err)
	}
	waitTenantRekey(t, a, "acme", "the rotation", func(s TenantRekeyStatus) bool { return s.State == store.TenantRekeyDone })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if k, err := b.TenantKeys().Get(t.Context(), "acme"); err == nil && slices.Equal(k.Versions(), []uint32{2}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node b still holds the retired version 10 s after the rotation ended")
		}
	}
	t.Logf("%d rounds of 120 opens at node b during the rotation", stop())
	if got := versionsOf(t, a.Store(), "acme"); len(got) != 1 || got[2] != 120 {
		t.Errorf("records under %v, want all 120 under version 2", got)
	}
}
