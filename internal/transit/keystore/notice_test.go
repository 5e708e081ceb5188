package keystore

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/sqlite"
	"github.com/keygate/keygate/internal/transit"
)

// bus is a fleet's notices in memory: every node subscribed to a channel,
// the publisher included, hears what is published on it before Publish
// returns.
type bus struct {
	mu   sync.Mutex
	subs map[string][]func(context.Context, string)
}

// fakeNode is a Node on a bus, whose seal and tenant deletions the test
// makes happen.
type fakeNode struct {
	bus      *bus
	onSeal   []func()
	onTenant []func(string)
}

func (n *fakeNode) Subscribe(_ context.Context, channel string, handle func(context.Context, string)) error {
	n.bus.mu.Lock()
	defer n.bus.mu.Unlock()
	n.bus.subs[channel] = append(n.bus.subs[channel], handle)
	return nil
}

func (n *fakeNode) Publish(ctx context.Context, channel, payload string) error {
	n.bus.mu.Lock()
	hs := n.bus.subs[channel]
	n.bus.mu.Unlock()
	for _, h := range hs {
		h(ctx, payload)
	}
	return nil
}

func (n *fakeNode) OnSeal(f func())                  { n.onSeal = append(n.onSeal, f) }
func (n *fakeNode) OnTenantDeleted(f func(string))   { n.onTenant = append(n.onTenant, f) }
func (n *fakeNode) OnTick(func(ctx context.Context)) {}

func (n *fakeNode) seal() {
	for _, f := range n.onSeal {
		f()
	}
}

func (n *fakeNode) tenantDeleted(tenant string) {
	for _, f := range n.onTenant {
		f(tenant)
	}
}

// busFleet opens two services on one SQLite store and root key, with
// nodes on one bus; the cached keys are served for an hour.
func busFleet(t *testing.T) (a, b *Service, bn *fakeNode) {
	t.Helper()
	root, err := rootkey.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "keygate.db")
	nb := &bus{subs: map[string][]func(context.Context, string){}}
	var svcs []*Service
	var nodes []*fakeNode
	for range 2 {
		st, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		kr, err := rootkey.New(rootkey.Options{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		n := &fakeNode{bus: nb}
		s, err := New(st, tenantkey.New(tenantkey.Config{Store: st, Root: kr}), n, Options{RefreshAfter: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		svcs, nodes = append(svcs, s), append(nodes, n)
	}
	return svcs[0], svcs[1], nodes[1]
}

// TestForget: what makes a node forget a key it holds opened: another
// node's deletion of the key (its notice), the deletion of its tenant,
// and the node's seal.
func TestForget(t *testing.T) {
	id := keyID{store.DefaultTenant, "k"}
	for _, tc := range []struct {
		name  string
		event func(t *testing.T, a *Service, bn *fakeNode)
	}{
		{"the key's deletion at another node", func(t *testing.T, a *Service, _ *fakeNode) {
			if err := a.Delete(ctx, id.tenant, id.name); err != nil {
				t.Fatal(err)
			}
		}},
		{"the tenant's deletion", func(_ *testing.T, _ *Service, bn *fakeNode) { bn.tenantDeleted(id.tenant) }},
		{"the seal", func(_ *testing.T, _ *Service, bn *fakeNode) { bn.seal() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, bn := busFleet(t)
			deletable(t, a, id.name, transit.CreateOptions{})
			if _, err := b.Get(ctx, id.tenant, id.name); err != nil {
				t.Fatal(err)
			}
			if b.cache.get(id) == nil {
				t.Fatal("the key read is not cached")
			}
			tc.event(t, a, bn)
			if b.cache.get(id) != nil {
				t.Error("the key is still held opened")
			}
		})
	}
}

// TestNoticeChange: a change at one node makes another that holds the
// key read it again, long before RefreshAfter.
func TestNoticeChange(t *testing.T) {
	a, b, _ := busFleet(t)
	const tn, name = store.DefaultTenant, "k"
	if _, _, err := a.Create(ctx, tn, name, transit.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, tn, name); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Rotate(ctx, tn, name, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b reads the rotated key", func() bool {
		k, err := b.Get(ctx, tn, name)
		return err == nil && k.LatestVersion() == 2
	})
}
