package secrets

import (
	"context"
	"testing"

	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
)

// rewrapAll seals every record of the tenant again under its data key's
// current version, as a rotation's pass does.
func rewrapAll(t *testing.T, k *kit, tenant string) int {
	t.Helper()
	ctx := context.Background()
	dk, err := k.keys.Fresh(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := k.st.TenantSealed(ctx, tenant, store.SealedRef{}, store.MaxSealedPage)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rec := range recs {
		next, err := dk.Rewrap(rec.Sealed, tenantkey.RecordAD(tenant, rec.SealedRef))
		if err != nil {
			t.Fatalf("rewrap %s %s: %v", rec.Kind, rec.Name, err)
		}
		if next != nil {
			if err := k.st.RewrapTenantSealed(ctx, tenant, rec.SealedRef, rec.Sealed, next); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	return n
}

// TestDataKeyRotation: the engine reads every version and the custom
// metadata of a path through a rotation of its tenant's data key — before
// the records are rewrapped, after, and once the old version is retired,
// with what it cached before the rotation and what it caches after — and
// seals what it writes under the new version at once.
func TestDataKeyRotation(t *testing.T) {
	k := newKit(t)
	ctx := context.Background()
	k.write(t, def, "p", `{"v":1}`)
	k.write(t, def, "p", `{"v":2}`)
	if err := k.e.SetMetadata(ctx, def, "p", MetadataUpdate{CustomMetadata: map[string]string{"owner": "ops"}}); err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		for v, want := range map[int]string{1: `{"v":1}`, 2: `{"v":2}`, 0: `{"v":2}`} {
			s, err := k.e.Read(ctx, def, "p", v)
			if err != nil || string(s.Data) != want || s.CustomMetadata["owner"] != "ops" {
				t.Fatalf("%s: version %d: %+v, %v", step, v, s, err)
			}
		}
	}
	check("before")
	check("cached")
	if _, err := k.keys.Rotate(ctx, def); err != nil {
		t.Fatal(err)
	}
	check("rotated, nothing rewrapped")
	vm := k.write(t, def, "q", `{"new":true}`)
	row, err := k.st.GetSecretValue(ctx, def, "q", vm.Version)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := tenantkey.SealedVersion(row.Sealed); v != 2 {
		t.Errorf("a value written after the rotation is under version %d, want 2", v)
	}
	if n := rewrapAll(t, k, def); n != 3 {
		t.Errorf("rewrapped %d records, want 3 (the metadata and two versions of p)", n)
	}
	check("rewrapped")
	if _, err := k.keys.Retire(ctx, def, 2); err != nil {
		t.Fatal(err)
	}
	check("old version retired")
	check("old version retired, cached again")
	if s := k.e.CacheStats(); s.Hits == 0 {
		t.Errorf("no read came from the cache: %+v", s)
	}
}
