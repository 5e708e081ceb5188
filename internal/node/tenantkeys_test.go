package node

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
)

func openDev(t *testing.T, dir string) *Node {
	t.Helper()
	n, err := Open(context.Background(), Config{DataDir: dir, Issuer: "https://kg.test", Audience: "api", Dev: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// TestTenantDataKey: a tenant's data key is made on first use, stored
// sealed under the root key (never in the clear), the same after a
// restart, binds what it seals to the tenant and the caller's associated
// data, is forgotten on Seal (with the OnSeal hooks run), and is refused
// for a tenant that does not exist.
func TestTenantDataKey(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	n := openDev(t, dir)
	if err := n.Store().CreateTenant(ctx, store.Tenant{Name: "acme", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	def, err := n.TenantDataKey(ctx, store.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	acme, err := n.TenantDataKey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := n.TenantDataKey(ctx, "acme"); again != acme {
		t.Error("a second call made another key")
	}
	sealed, err := def.Seal([]byte("key material"), []byte("row 1"))
	if err != nil || len(sealed) != len("key material")+DataKeyOverhead {
		t.Fatalf("Seal: %d bytes, %v", len(sealed), err)
	}
	if pt, err := def.Open(sealed, []byte("row 1")); err != nil || string(pt) != "key material" {
		t.Fatalf("Open: %q %v", pt, err)
	}
	for name, try := range map[string]func() ([]byte, error){
		"another record": func() ([]byte, error) { return def.Open(sealed, []byte("row 2")) },
		"another tenant": func() ([]byte, error) { return acme.Open(sealed, []byte("row 1")) },
		"truncated":      func() ([]byte, error) { return def.Open(sealed[:DataKeyOverhead-1], []byte("row 1")) },
		"altered": func() ([]byte, error) {
			b := bytes.Clone(sealed)
			b[len(b)-1] ^= 1
			return def.Open(b, []byte("row 1"))
		},
	} {
		if _, err := try(); !errors.Is(err, ErrDataKeyOpen) {
			t.Errorf("%s: %v, want ErrDataKeyOpen", name, err)
		}
	}
	tn, err := n.Store().GetTenant(ctx, "acme")
	if err != nil || len(tn.DataKey) != rootkey.KeySize+rootkey.Overhead {
		t.Fatalf("stored data key: %d bytes, %v", len(tn.DataKey), err)
	}
	if _, err := n.TenantDataKey(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a tenant that does not exist: %v", err)
	}
	if def.String() != "DataKey(default)" {
		t.Errorf("String: %q", def.String())
	}

	var sealedHook atomic.Int32
	n.OnSeal(func() { sealedHook.Add(1) })
	n.Seal()
	if sealedHook.Load() != 1 {
		t.Errorf("OnSeal ran %d times", sealedHook.Load())
	}
	if _, err := n.TenantDataKey(ctx, "acme"); !errors.Is(err, rootkey.ErrSealed) {
		t.Errorf("sealed: %v", err)
	}
	n.Close()

	// After a restart, the stored key opens what the first one sealed.
	n2 := openDev(t, dir)
	def2, err := n2.TenantDataKey(ctx, store.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := def2.Open(sealed, []byte("row 1")); err != nil || string(pt) != "key material" {
		t.Fatalf("after a restart: %q %v", pt, err)
	}
}

// TestTenantDataKeyRace: nodes making a tenant's first data key at once
// end up with the same key: one stores it, the others read it.
func TestTenantDataKeyRace(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	a := openDev(t, dir)
	b := openDev(t, dir)
	c := openDev(t, dir)
	if err := a.Store().CreateTenant(ctx, store.Tenant{Name: "race", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	keys := make([]*DataKey, 3)
	var wg sync.WaitGroup
	for i, n := range []*Node{a, b, c} {
		wg.Go(func() {
			k, err := n.TenantDataKey(ctx, "race")
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	sealed, err := keys[0].Seal([]byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys[1:] {
		if _, err := k.Open(sealed, nil); err != nil {
			t.Errorf("node %d's key does not open node 0's value: %v", i+1, err)
		}
	}
}

// TestOnTick: Tick runs what OnTick registered.
func TestOnTick(t *testing.T) {
	n := openDev(t, filepath.Join(t.TempDir(), "data"))
	var ran atomic.Int32
	n.OnTick(func(context.Context) { ran.Add(1) })
	n.Tick(context.Background())
	if ran.Load() != 1 {
		t.Errorf("OnTick ran %d times", ran.Load())
	}
}

// TestTenantRecreatedDataKey: a tenant deleted and made again under its
// name gets a data key of its own, stored in its row: FreshTenantDataKey
// reads the row and replaces the key the node held (TenantDataKey then
// returns it), and a deletion told to the node's publisher drops the key
// at once and runs the OnTenantDeleted hooks.
func TestTenantRecreatedDataKey(t *testing.T) {
	ctx := context.Background()
	n := openDev(t, filepath.Join(t.TempDir(), "data"))
	mk := func() {
		t.Helper()
		if err := n.Store().CreateTenant(ctx, store.Tenant{Name: "acme", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	mk()
	old, err := n.TenantDataKey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if k, err := n.FreshTenantDataKey(ctx, "acme"); k != old || err != nil {
		t.Errorf("FreshTenantDataKey of an unchanged row: another key (%v)", err)
	}
	if err := n.Store().DeleteTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	mk()
	fresh, err := n.FreshTenantDataKey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	tn, err := n.Store().GetTenant(ctx, "acme")
	if err != nil || tn.DataKey == nil {
		t.Fatalf("the new row's data key: %v", err)
	}
	sealed, _ := fresh.Seal([]byte("x"), nil)
	if _, err := old.Open(sealed, nil); err == nil {
		t.Error("the new tenant's data key is the deleted one's")
	}
	if k, _ := n.TenantDataKey(ctx, "acme"); k != fresh {
		t.Error("TenantDataKey still returns the deleted tenant's key")
	}

	var told []string
	n.OnTenantDeleted(func(tenant string) { told = append(told, tenant) })
	n.Publisher().TenantDeleted(ctx, "acme")
	if len(told) != 1 || told[0] != "acme" {
		t.Errorf("OnTenantDeleted hooks told %q", told)
	}
	n.tenants.mu.Lock()
	kept := n.tenants.keys["acme"]
	n.tenants.mu.Unlock()
	if kept != nil {
		t.Error("the deleted tenant's data key is still held")
	}
}
