package transit

import (
	"container/heap"
	"context"
	"sync"
)

// Caller is whom an operation runs for. The engine shares its workers for
// asymmetric-key operations between tenants, and within a tenant between principals (the
// tokens' clients or users), in proportion to what their operations cost,
// so that one caller's flood waits behind itself. The zero Caller is one
// caller like any other.
type Caller struct {
	Tenant    string
	Principal string
}

// pool runs the operations that cost at least poolCost (every asymmetric
// one) on a fixed number of workers. An
// operation takes a worker on its caller's goroutine and gives it back when
// done; one that finds none free waits in its caller's queue. A freed worker
// goes to the tenant that has been charged least, then, within it, to the
// principal charged least: start-time fair queuing (Goyal, Vin and Cheng
// 1996), the virtual-clock form of deficit round robin by cost. Each flow
// carries a pass, the virtual time its next operation starts at; serving
// one moves the group's clock to that pass and adds the operation's cost to
// it; a flow that starts waiting again is brought up to the clock, so that
// it banks no credit for its idle time but keeps what it owes. A newcomer
// starts at the clock, below every flow served at or after it: it waits
// for the operations in progress and for at most one operation of each
// other flow still waiting at the clock itself.
//
// Requests hold a ticket while they have work on the pool (a batch holds
// one for all its items): at most tenantQueue per tenant and callerQueue
// per caller, beyond which that caller's next request fails with ErrBusy.
// No bound is shared between tenants, so that one tenant's requests cannot
// crowd out another's.
type pool struct {
	mu          sync.Mutex
	workers     int
	free        int // workers not held
	waiting     int // operations in the queues
	started     uint64
	tenantQueue int
	callerQueue int
	tenants     group   // each tenant's flow holds a group of its callers
	spare       []*flow // flows dropped, for the next ones: no allocation per operation
}

func newPool(workers, tenantQueue, callerQueue int) *pool {
	return &pool{workers: workers, free: workers, tenantQueue: tenantQueue, callerQueue: callerQueue}
}

// PrivateKeyStats is the state of an engine's workers for asymmetric-key
// operations (Options.PrivateKeyWorkers).
type PrivateKeyStats struct {
	Workers int    // how many there are
	Running int    // operations holding one
	Waiting int    // operations waiting for one
	Started uint64 // operations that have had one, since the engine was made
}

// PrivateKeyStats reports the state of the engine's workers.
func (e *Engine) PrivateKeyStats() PrivateKeyStats {
	p := e.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	return PrivateKeyStats{Workers: p.workers, Running: p.workers - p.free, Waiting: p.waiting, Started: p.started}
}

// group is one level of the queuing: flows by name, and a heap of those
// with operations waiting, least pass first.
type group struct {
	flows  map[string]*flow
	active flowHeap
	clock  int64  // the pass of the operation served last
	seq    uint64 // activations so far: equal passes go in arrival order
}

// flow is a tenant (with its callers) or a caller (with its waiting
// operations). It exists while some request holds a ticket on it.
type flow struct {
	name    string
	pass    int64
	seq     uint64
	index   int // in the group's active heap; -1: nothing waiting
	tickets int
	callers group     // a tenant's
	waiters []*waiter // a caller's, in arrival order
}

type waiter struct {
	ready   chan struct{}
	cost    int64
	granted bool
}

// ticket is a request's place in its tenant's and caller's queues.
type ticket struct {
	p              *pool
	tenant, caller *flow
}

// maxSpare bounds the flows kept for reuse.
const maxSpare = 64

// flow returns g's flow of name, made if it has none.
func (p *pool) flow(g *group, name string) *flow {
	f := g.flows[name]
	if f != nil {
		return f
	}
	if g.flows == nil {
		g.flows = map[string]*flow{}
	}
	if n := len(p.spare); n > 0 {
		f = p.spare[n-1]
		p.spare[n-1] = nil
		p.spare = p.spare[:n-1]
	} else {
		f = &flow{index: -1}
	}
	f.name = name
	g.flows[name] = f
	return f
}

// forget takes f out of g and keeps it for reuse: it has no ticket, so no
// waiter, and a tenant's has no caller.
func (p *pool) forget(g *group, f *flow) {
	delete(g.flows, f.name)
	if len(p.spare) < maxSpare {
		*f = flow{index: -1, callers: group{flows: f.callers.flows, active: f.callers.active[:0]}, waiters: f.waiters[:0]}
		p.spare = append(p.spare, f)
	}
}

// activate puts f, which has started waiting, in the active heap, its pass
// brought up to the clock.
func (g *group) activate(f *flow) {
	f.pass = max(f.pass, g.clock)
	g.seq++
	f.seq = g.seq
	heap.Push(&g.active, f)
}

// serve charges f for an operation of cost c about to run and keeps it in
// the heap while it has more waiting (more reports whether it has).
func (g *group) serve(f *flow, c int64, more bool) {
	if f.index < 0 {
		f.pass = max(f.pass, g.clock)
	}
	g.clock = max(g.clock, f.pass)
	f.pass += c
	switch {
	case f.index >= 0 && more:
		heap.Fix(&g.active, f.index)
	case f.index >= 0:
		heap.Remove(&g.active, f.index)
	}
}

// enter takes a ticket for who, or fails with ErrBusy when who or who's
// tenant holds as many as it may.
func (p *pool) enter(who Caller) (ticket, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.flow(&p.tenants, who.Tenant)
	c := p.flow(&t.callers, who.Principal)
	if t.tickets >= p.tenantQueue || c.tickets >= p.callerQueue {
		p.drop(t, c)
		return ticket{}, errBusy
	}
	t.tickets++
	c.tickets++
	return ticket{p: p, tenant: t, caller: c}, nil
}

// leave gives the ticket back. Its request has no operation waiting.
func (t *ticket) leave() {
	p := t.p
	p.mu.Lock()
	defer p.mu.Unlock()
	t.tenant.tickets--
	t.caller.tickets--
	p.drop(t.tenant, t.caller)
}

// drop forgets the flows no ticket holds any more (what they owe goes with
// them: a caller with nothing in progress owes nothing).
func (p *pool) drop(t, c *flow) {
	if c.tickets == 0 {
		p.forget(&t.callers, c)
	}
	if t.tickets == 0 {
		p.forget(&p.tenants, t)
	}
}

// granted, when a test sets it, is told of every operation given a
// worker, in the order they get one (under the pool's lock).
var granted func(tenant, principal string)

var errBusy = newError(ReasonBusy, "too many asymmetric-key operations of this caller or tenant in progress; retry later")

// acquire waits for a worker for an operation of cost c, in t's turn.
func (p *pool) acquire(ctx context.Context, t *ticket, c int64) error {
	p.mu.Lock()
	if p.free > 0 && p.tenants.active.Len() == 0 {
		p.free--
		p.started++
		t.tenant.callers.serve(t.caller, c, false)
		p.tenants.serve(t.tenant, c, false)
		if granted != nil {
			granted(t.tenant.name, t.caller.name)
		}
		p.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		p.mu.Unlock()
		return wrapError(ReasonCanceled, "waiting for a worker", err)
	}
	w := &waiter{ready: make(chan struct{}), cost: c}
	t.caller.waiters = append(t.caller.waiters, w)
	p.waiting++
	if t.caller.index < 0 {
		t.tenant.callers.activate(t.caller)
	}
	if t.tenant.index < 0 {
		p.tenants.activate(t.tenant)
	}
	p.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	if w.granted { // granted as the context ended: pass the worker on
		p.mu.Unlock()
		p.release()
	} else {
		p.withdraw(t, w)
		p.mu.Unlock()
	}
	return wrapError(ReasonCanceled, "waiting for a worker", ctx.Err())
}

// withdraw takes a waiter that gave up out of its caller's queue.
func (p *pool) withdraw(t *ticket, w *waiter) {
	c := t.caller
	for i, x := range c.waiters {
		if x == w {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			p.waiting--
			break
		}
	}
	if len(c.waiters) == 0 && c.index >= 0 {
		heap.Remove(&t.tenant.callers.active, c.index)
	}
	if t.tenant.callers.active.Len() == 0 && t.tenant.index >= 0 {
		heap.Remove(&p.tenants.active, t.tenant.index)
	}
}

// release gives a worker back: to the next operation in fair order, or
// to the free ones.
func (p *pool) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tenants.active.Len() == 0 {
		p.free++
		return
	}
	t := p.tenants.active[0]
	c := t.callers.active[0]
	w := c.waiters[0]
	c.waiters[0] = nil
	c.waiters = c.waiters[1:]
	p.waiting--
	p.started++
	t.callers.serve(c, w.cost, len(c.waiters) > 0)
	p.tenants.serve(t, w.cost, t.callers.active.Len() > 0)
	if granted != nil {
		granted(t.name, c.name)
	}
	w.granted = true
	close(w.ready)
}

// flowHeap orders flows by pass, then by when they started waiting.
type flowHeap []*flow

func (h flowHeap) Len() int { return len(h) }
func (h flowHeap) Less(i, j int) bool {
	return h[i].pass < h[j].pass || h[i].pass == h[j].pass && h[i].seq < h[j].seq
}
func (h flowHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *flowHeap) Push(x any) {
	f := x.(*flow)
	f.index = len(*h)
	*h = append(*h, f)
}
func (h *flowHeap) Pop() any {
	old := *h
	f := old[len(old)-1]
	old[len(old)-1] = nil
	f.index = -1
	*h = old[:len(old)-1]
	return f
}

// grant is a worker held; done gives it back (and the ticket taken for it).
// The zero grant holds nothing.
type grant struct {
	p   *pool
	own ticket // the operation's own, when it is not a batch's
}

func (g grant) done() {
	if g.p == nil {
		return
	}
	g.p.release()
	if g.own.p != nil {
		g.own.leave()
	}
}

// turn waits for a worker for one item of o with k, as t's (a batch's
// ticket) or, with t nil, as who's with a ticket of its own; o below
// poolCost runs at once, holding nothing.
func (e *Engine) turn(ctx context.Context, k *Key, o op, t *ticket, who Caller) (grant, error) {
	if !k.pooled(o) {
		return grant{}, nil
	}
	return e.work(ctx, t, who, k.cost(o))
}

// work takes a worker of the pool for an operation of cost c, as t's, or,
// with t nil, as who's with a ticket of its own.
func (e *Engine) work(ctx context.Context, t *ticket, who Caller, c int64) (grant, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	g := grant{p: e.pool}
	if t == nil {
		var err error
		if g.own, err = e.pool.enter(who); err != nil {
			return grant{}, err
		}
		t = &g.own
	}
	if err := e.pool.acquire(ctx, t, c); err != nil {
		if g.own.p != nil {
			g.own.leave()
		}
		return grant{}, err
	}
	return g, nil
}
