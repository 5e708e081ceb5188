package node

import (
	"context"
	"sync"

	"github.com/keygate/keygate/internal/rootkey/tenantkey"
)

// TenantKeys are the tenants' data keys (package tenantkey), sealed under
// the node's root key: what a tenant keeps secret in the store is sealed
// under them. The node forgets them when it seals and drops a tenant's
// when the tenant is deleted (see OnTenantDeleted).
func (n *Node) TenantKeys() *tenantkey.Keys { return n.tenants }

// hooks are what other parts of the node's state ask to be told of.
type hooks struct {
	mu       sync.Mutex
	onSeal   []func()
	onTick   []func(context.Context)
	onTenant []func(string)
}

// OnSeal registers f to run each time the node seals, after the root key,
// the private signing key and the tenants' data keys are forgotten: what
// holds key material opened under them forgets it too.
func (n *Node) OnSeal(f func()) {
	n.hooks.mu.Lock()
	defer n.hooks.mu.Unlock()
	n.hooks.onSeal = append(n.hooks.onSeal, f)
}

// OnTick registers f to run at each Tick, after the node's own schedule:
// the periodic work of what is built on the node (transit's automatic key
// rotation). f runs on Tick's goroutine and the next Tick waits for it:
// work that can take long, such as generating keys, belongs on a goroutine
// that f starts and bounds.
func (n *Node) OnTick(f func(ctx context.Context)) {
	n.hooks.mu.Lock()
	defer n.hooks.mu.Unlock()
	n.hooks.onTick = append(n.hooks.onTick, f)
}

// OnTenantDeleted registers f to run each time a tenant is deleted, at
// this node or (told by a notice) at another of the fleet, after the
// tenant's data key is forgotten: what holds anything of the tenant
// (opened keys, wrapping keys) forgets it too, since a tenant made again
// under the name is another one.
func (n *Node) OnTenantDeleted(f func(tenant string)) {
	n.hooks.mu.Lock()
	defer n.hooks.mu.Unlock()
	n.hooks.onTenant = append(n.hooks.onTenant, f)
}

// tenantDeleted drops what the node holds of a deleted tenant.
func (n *Node) tenantDeleted(tenant string) {
	n.tenants.Drop(tenant)
	n.hooks.mu.Lock()
	fs := n.hooks.onTenant
	n.hooks.mu.Unlock()
	for _, f := range fs {
		f(tenant)
	}
}

func (h *hooks) sealed() {
	h.mu.Lock()
	fs := h.onSeal
	h.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

func (h *hooks) ticked(ctx context.Context) {
	h.mu.Lock()
	fs := h.onTick
	h.mu.Unlock()
	for _, f := range fs {
		f(ctx)
	}
}
