package node

import (
	"context"
	"errors"
	"path/filepath"
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

// TestSealForgetsTenantKeys: Seal forgets the tenants' data keys and runs
// the OnSeal hooks; after the next unseal a tenant's key is opened anew.
func TestSealForgetsTenantKeys(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	n := openDev(t, dir)
	before, err := n.TenantKeys().Get(ctx, store.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	var sealedHook atomic.Int32
	n.OnSeal(func() { sealedHook.Add(1) })
	n.Seal()
	if sealedHook.Load() != 1 {
		t.Errorf("OnSeal ran %d times", sealedHook.Load())
	}
	if _, err := n.TenantKeys().Get(ctx, store.DefaultTenant); !errors.Is(err, rootkey.ErrSealed) {
		t.Errorf("sealed: %v", err)
	}
	root, err := rootkey.LoadKeyFile(filepath.Join(dir, RootKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.UnsealKey(ctx, root); err != nil {
		t.Fatal(err)
	}
	after, err := n.TenantKeys().Get(ctx, store.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Error("the data key held before the seal outlived it")
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

// TestTenantDeleted: a deletion told to the node's publisher drops the
// tenant's data key at once and runs the OnTenantDeleted hooks.
func TestTenantDeleted(t *testing.T) {
	ctx := context.Background()
	n := openDev(t, filepath.Join(t.TempDir(), "data"))
	if err := n.Store().CreateTenant(ctx, store.Tenant{Name: "acme", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	before, err := n.TenantKeys().Get(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	var told []string
	n.OnTenantDeleted(func(tenant string) { told = append(told, tenant) })
	n.Publisher().TenantDeleted(ctx, "acme")
	if len(told) != 1 || told[0] != "acme" {
		t.Errorf("OnTenantDeleted hooks told %q", told)
	}
	if after, err := n.TenantKeys().Get(ctx, "acme"); err != nil || after == before {
		t.Errorf("the deleted tenant's data key is still held (%v)", err)
	}
}
